"""``python -m benchmarks``: quick and full tables side by side in one file."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from benchmarks.__main__ import (
    FULL_ONLY,
    HEADER_LINES,
    QUICK_MARK,
    SUITES,
    _replace_sections,
    _with_header,
    main,
)

from benchmarks import current_commit


def test_a_quick_run_keeps_the_full_tables_and_their_header_line() -> None:
    full = _with_header("## Ledger\n\nfull numbers\n", False, "measured on day 1.")
    assert full.startswith("# Benchmarks\n\n" + HEADER_LINES[False] + "measured on day 1.")
    quick_title = "Ledger" + QUICK_MARK
    both = _replace_sections(full, {quick_title: f"## {quick_title}\n\nquick numbers\n"})
    both = _with_header(both, True, "measured on day 2.")
    assert HEADER_LINES[False] + "measured on day 1." in both  # the full run's line stays
    assert HEADER_LINES[True] + "measured on day 2." in both
    assert "full numbers" in both and "quick numbers" in both
    again = _with_header(
        _replace_sections(both, {quick_title: f"## {quick_title}\n\nnewer\n"}), True, "day 3."
    )
    assert "quick numbers" not in again and "newer" in again and "full numbers" in again
    assert again.count("# Benchmarks") == 1 and "day 2" not in again
    assert _with_header("", True, "x.").startswith("# Benchmarks\n\n" + HEADER_LINES[True])


def test_a_quick_run_skips_the_suites_that_have_no_quick_size(tmp_path: Path) -> None:
    out = tmp_path / "B.md"
    out.write_text("## Kept\n\nold numbers\n")
    assert set(SUITES) >= FULL_ONLY
    assert main(["--quick", "--only", "protocol", "--out", str(out)]) == 0
    assert out.read_text() == "## Kept\n\nold numbers\n"  # nothing ran, nothing replaced


def test_the_commit_is_dirty_only_when_measured_code_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "BENCHMARKS.md").write_text("tables\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    monkeypatch.chdir(tmp_path)
    clean = current_commit()
    assert clean != "unknown" and not clean.endswith("-dirty")
    (tmp_path / "BENCHMARKS.md").write_text("new tables\n")  # what a benchmark writes
    assert current_commit() == clean
    (tmp_path / "code.py").write_text("x = 2\n")
    assert current_commit() == clean + "-dirty"
