"""A campaign process killed with SIGKILL, then resumed: nothing repeated, nothing lost.

``rsilab run synthetic --workers 2`` runs in a real subprocess and is killed as soon as its
n-th experiment intent is in the store (so that experiment, and maybe the other Worker's, is
in flight), at two points of the campaign; the resume takes over the dead runner's lease.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rsilab.orchestrator.builtin.runner import run_campaign
from rsilab.records import Campaign, Intent
from rsilab.store import Lab, Store
from rsilab.tasks import Budget, get_task
from tests.orchestrator.runner_checks import check_campaign

BUDGET = 8


def _begun(store: Store) -> int:
    """Experiment intents begun so far, in any state."""
    return sum(1 for i in store.query_as(Intent) if i.key.startswith("exp:"))


def _run_until_killed(lab: Lab, log: Path, kill_after: int) -> None:
    argv = [sys.executable, "-m", "rsilab", "run", "synthetic", "--workers", "2"]
    argv += ["--budget", f"experiments={BUDGET}", "--lab", str(lab.path)]
    env = {**os.environ, "RSILAB_SANDBOX": "process"}
    with log.open("wb") as out, subprocess.Popen(argv, stdout=out, stderr=out, env=env) as child:
        try:
            deadline = time.monotonic() + 120
            while _begun(lab.store) < kill_after and child.poll() is None:
                assert time.monotonic() < deadline, f"the campaign is too slow:\n{log.read_text()}"
                time.sleep(0.005)
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()  # reaped: its pid is gone, so its lease can be taken at once
    assert child.returncode == -signal.SIGKILL, log.read_text()


@pytest.mark.parametrize("kill_after", [2, 6])
def test_a_killed_campaign_resumes_without_repeating_or_losing_experiments(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kill_after: int
) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    _run_until_killed(lab, tmp_path / "log", kill_after)
    [campaign] = lab.store.query_as(Campaign)
    assert campaign.state == "running"  # as the dead runner left it

    task = get_task("synthetic")
    result = run_campaign(lab, task, budget=Budget(experiments=BUDGET), campaign_id=campaign.id)
    assert result.state == "finished"
    done = check_campaign(lab.store, campaign.id, BUDGET)
    assert any(i.attempts == 2 for i in done)  # the experiment in flight ran again
    assert result.experiments == BUDGET  # one record per experiment, however often attempted
