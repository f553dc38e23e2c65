"""``rsilab run`` and ``rsilab resume`` on the synthetic task."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import explain, rsilab


def test_run_prints_progress_lineage_and_measures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    ran = rsilab("run", "synthetic", "--budget", "experiments=4", "--lab", lab)
    assert ran.exit_code == 0, explain(ran)
    assert "experiment 4/4" in ran.stdout and "H0/M0" in ran.stdout
    assert "lock-in:" in ran.stdout and "[finished]" in ran.stdout
    again = rsilab("resume", "latest", "--lab", lab)
    assert again.exit_code == 0 and "nothing to do" in again.stdout, explain(again)
    other = rsilab("run", "synthetic", "--agents", "llm", "--lab", lab)
    assert other.exit_code == 1 and "not available yet" in other.stderr
