"""The security tests on the path a non-root user takes: from a root run (as CI runs), the escape
suite, the sandbox's pinned arguments and the seccomp filter run again as a fresh unprivileged
uid (see tests/sandbox/unprivileged.py), and must pass there without skipping."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.sandbox.helpers import bwrap_problem
from tests.sandbox.unprivileged import _blocked, run_pytest_as_test_user

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="run as a non-root user, the whole suite already takes that path"
)

SECURITY_TESTS = (
    "tests/sandbox/test_escape.py",
    "tests/sandbox/test_bwrap_args.py",
    "tests/sandbox/test_seccomp.py",
)


def _count(word: str, summary: str) -> int:
    found = re.search(rf"(\d+) {word}", summary)
    return int(found.group(1)) if found else 0


def test_the_security_tests_pass_as_an_unprivileged_user(tmp_path: Path) -> None:
    assert bwrap_problem() is None, f"bubblewrap is unusable here: {bwrap_problem()}"
    ran = run_pytest_as_test_user(["-q", "-rs", *SECURITY_TESTS], tmp_path / "user", timeout=600)
    output = ran.stdout + ran.stderr
    assert ran.returncode == 0, output[-4000:]
    summary = output.strip().splitlines()[-1]
    # Every escape attack and the non-root argument tests ran: none was skipped for lack of a
    # usable sandbox, and the run really was unprivileged (the root-only tests skip by name).
    assert _count("passed", summary) >= 30, summary
    skipped = re.findall(r"SKIPPED \[\d+\] (\S+?):\d+: (.*)", output)
    assert all("as root" in why or "only root" in why for _, why in skipped), skipped
    assert not any("test_escape" in where for where, _ in skipped), skipped


def test_a_needed_folder_the_test_user_cannot_enter_is_covered_with_all_its_entries(
    tmp_path: Path,
) -> None:
    # A checkout cloned straight into `mktemp -d` is itself 0700 (CI's clean clone can be).
    closed = tmp_path / "checkout"
    (closed / "tests").mkdir(parents=True)
    (closed / "pyproject.toml").write_text("")
    closed.chmod(0o700)
    open_folder = tmp_path / "open"
    open_folder.mkdir(mode=0o755)
    open_folder.chmod(0o755)
    covers = _blocked([closed, open_folder])
    assert covers[closed] == {"tests", "pyproject.toml"}
    assert open_folder not in covers
