"""``make demo``: the main job on a fresh lab, here on the fast synthetic task."""

from __future__ import annotations

from pathlib import Path

import pytest

from rsilab.demo import DEMO_BUDGET, demo_commands, run_demo


def test_the_demo_runs_a_campaign_reports_it_and_verifies_the_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    lab = tmp_path / "demo-lab"
    lab.mkdir()
    (lab / "stale").write_text("from an earlier demo")  # the demo starts from a fresh lab
    assert run_demo(lab, "synthetic", "experiments=4") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "$ rsilab run synthetic" in out and "experiment 4/4" in out
    assert "H0/M0" in out and f"report: {lab / 'reports'}" in out
    assert not (lab / "stale").exists()
    assert list((lab / "reports").glob("cmp-*.md"))


def test_the_demo_runs_digits_with_two_workers() -> None:
    run = demo_commands(Path("x"))[1]
    assert run[:2] == ["run", "digits"] and run[run.index("--budget") + 1] == DEMO_BUDGET
    assert run[run.index("--workers") + 1] == "2"
