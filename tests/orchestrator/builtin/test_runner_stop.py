"""Stopping a campaign with experiments in flight: cancel them, keep the campaign resumable.

The task here is ``synthetic`` with a harness whose train job holds (until a flag file
appears) whenever it is run by a Worker (Worker seeds are small; the controller's are drawn
from the lab secret below 2**31), so jobs are reliably running when the stop comes.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rsilab.orchestrator.builtin.runner import StopRequest, run_campaign
from rsilab.records import Experiment, ExperimentState, Intent, IntentState, Job, JobStatus
from rsilab.store import Lab
from rsilab.tasks import Budget, Task, get_task, task
from tests.orchestrator.runner_checks import check_campaign

_HARNESS: list[Path] = []

_HOLD = """
import time
from pathlib import Path
if args.seed < 1000:  # a Worker's job: hold until the test lets go (or two minutes pass)
    deadline = time.monotonic() + 120
    while not Path({flag!r}).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
"""


@task
def holdsynthetic() -> Task:
    """``synthetic`` whose Worker train jobs hold until released (see the module docstring);
    plain ``synthetic`` outside the ``held`` fixture (other tests may list every task)."""
    base = get_task("synthetic")
    harness = _HARNESS[0] if _HARNESS else base.harness
    return base.model_copy(update={"name": "holdsynthetic", "harness": harness, "source": __name__})


@pytest.fixture
def held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The held task's harness, written under ``tmp_path``; yields the flag that releases it."""
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    harness = tmp_path / "harness"
    shutil.copytree(get_task("synthetic").harness, harness)
    flag = tmp_path / "release"
    train = harness / "train.py"
    text = train.read_text()
    anchor = "    config = json.loads(Path(args.config).read_text())\n"
    hold = "".join(f"    {line}\n" for line in _HOLD.format(flag=str(flag)).strip().splitlines())
    train.write_text(text.replace(anchor, hold + anchor))
    _HARNESS[:] = [harness]
    yield flag
    flag.touch()  # never leave a held job behind
    _HARNESS.clear()


def _when_jobs_run(lab: Lab, count: int, then: StopRequest) -> threading.Thread:
    """Ask ``then`` to cancel once ``count`` Worker train jobs are running."""

    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            running = [
                j
                for j in lab.store.query_as(Job)
                if j.status is JobStatus.RUNNING and not j.kind.is_private
            ]
            if len(running) >= count:
                break
            time.sleep(0.02)
        then.request()
        then.request()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_cancelled_experiments_are_run_again_on_resume(lab: Lab, held: Path) -> None:
    task_ = get_task("holdsynthetic")
    stop = StopRequest()
    watcher = _when_jobs_run(lab, 1, stop)
    first = run_campaign(lab, task_, budget=Budget(experiments=3), workers=2, stop=stop)
    watcher.join()
    assert first.state == "stopped"
    [paused] = lab.store.query_as(Experiment, campaign_id=first.campaign_id)  # the reference
    assert not paused.is_finished()  # kept open for the resume's attempt
    jobs = lab.store.query_as(Job, campaign_id=first.campaign_id)
    assert [j.status for j in jobs] == [JobStatus.CANCELLED]
    pending = lab.store.query_as(Intent, campaign_id=first.campaign_id)
    assert [i.key for i in pending if i.state is IntentState.PENDING] == ["exp:1"]

    held.touch()
    resumed = run_campaign(lab, task_, budget=Budget(experiments=3), campaign_id=first.campaign_id)
    assert resumed.state == "finished"
    done = check_campaign(lab.store, first.campaign_id, 3)
    again = next(i for i in done if i.key == "exp:1")
    assert again.attempts == 2 and (again.result or {})["experiment_id"] == paused.id
    assert lab.store.get_as(paused.id, Experiment).state is ExperimentState.SUCCEEDED
    assert len(lab.store.query_as(Experiment, campaign_id=first.campaign_id)) == 3
