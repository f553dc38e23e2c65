"""Recovery after a crash, down to a campaign runner killed with SIGKILL at a random point."""

from __future__ import annotations

import inspect
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rsilab.expos import open_campaign
from rsilab.orchestrator.campaign._intents import DoneIntent, begin, complete, pending_intents
from rsilab.orchestrator.campaign._lease import Lease, LeaseLost, acquire_lease
from rsilab.orchestrator.campaign._recovery import (
    INTERRUPTED_ERROR,
    INTERRUPTED_SUMMARY,
    RecoveryReport,
    recover_campaign,
)
from rsilab.records import (
    Direction,
    EventDraft,
    Experiment,
    ExperimentState,
    Intent,
    IntentState,
    Job,
    JobInputs,
    JobKind,
    JobStatus,
    TaskRef,
)
from rsilab.store import Lab, Store, verify_store

STEPS = 40


def _setup(store: Store) -> tuple[str, str]:
    campaign_id = open_campaign(store, TaskRef(name="digits")).id
    direction = Direction(campaign_id=campaign_id, title="d", hypothesis="h")
    store.commit(EventDraft(actor="t", role="main", action="test"), [direction])
    return campaign_id, direction.id


def _job(campaign_id: str, status: JobStatus) -> Job:
    inputs = JobInputs(workspace_sha256="0" * 64, seed=0)
    return Job(campaign_id=campaign_id, kind=JobKind.TRAIN, status=status, inputs=inputs)


def test_recovery_interrupts_unfinished_jobs_and_lists_pending_intents(lab: Lab) -> None:
    campaign_id, _ = _setup(lab.store)
    other_campaign, _ = _setup(lab.store)
    jobs = [_job(campaign_id, s) for s in (JobStatus.QUEUED, JobStatus.RUNNING)]
    finished = _job(campaign_id, JobStatus.SUCCEEDED)
    elsewhere = _job(other_campaign, JobStatus.RUNNING)
    lab.store.commit(EventDraft(actor="t", role="controller", action="test"), [*jobs, finished])
    lab.store.commit(EventDraft(actor="t", role="controller", action="test"), [elsewhere])
    pending = begin(lab.store, campaign_id, "a", "x")
    done = begin(lab.store, campaign_id, "b", "x")
    assert isinstance(pending, Intent) and isinstance(done, Intent)
    complete(lab.store, done, {})

    lease = acquire_lease(lab.store, campaign_id)
    report = recover_campaign(lab.store, lease, pending=pending_intents(lab.store, campaign_id))
    assert report.interrupted_job_ids == [j.id for j in jobs]
    assert [i.key for i in report.pending] == ["a"] and report.done_intents == 1
    assert "2 job(s) interrupted, 0 experiment(s) closed, 1 intent(s) to re-run, 1 done" in (
        report.summary()
    )
    for job in jobs:
        stored = lab.store.get_as(job.id, Job)
        assert stored.status is JobStatus.INTERRUPTED and stored.error == INTERRUPTED_ERROR
        assert stored.finished_at is not None
    assert lab.store.get_as(finished.id, Job).status is JobStatus.SUCCEEDED
    assert lab.store.get_as(elsewhere.id, Job).status is JobStatus.RUNNING
    assert lab.store.events()[-1].action == "jobs_interrupted"


def test_recovery_again_changes_nothing(lab: Lab) -> None:
    campaign_id, _ = _setup(lab.store)
    lab.store.commit(
        EventDraft(actor="t", role="controller", action="test"),
        [_job(campaign_id, JobStatus.RUNNING)],
    )
    lease = acquire_lease(lab.store, campaign_id)
    assert len(recover_campaign(lab.store, lease).interrupted_job_ids) == 1
    assert recover_campaign(lab.store, lease).interrupted_job_ids == []
    actions = [e.action for e in lab.store.events(campaign_id=campaign_id)]
    assert actions.count("jobs_interrupted") == 1


def test_recovery_closes_the_experiments_a_dead_runner_left_open(lab: Lab) -> None:
    campaign_id, direction_id = _setup(lab.store)
    left = [
        Experiment(campaign_id=campaign_id, direction_id=direction_id, state=state)
        for state in (ExperimentState.CREATED, ExperimentState.RUNNING)
    ]
    ended = Experiment(
        campaign_id=campaign_id, direction_id=direction_id, state=ExperimentState.SUCCEEDED
    )
    lab.store.commit(EventDraft(actor="t", role="worker", action="test"), [*left, ended])
    lease = acquire_lease(lab.store, campaign_id)
    report = recover_campaign(lab.store, lease)
    assert report.closed_experiment_ids == [e.id for e in left]
    for exp in left:
        stored = lab.store.get_as(exp.id, Experiment)
        assert stored.state is ExperimentState.CANCELLED and stored.finished_at is not None
        assert stored.summary_text == INTERRUPTED_SUMMARY
    assert lab.store.get_as(ended.id, Experiment).state is ExperimentState.SUCCEEDED
    assert recover_campaign(lab.store, lease).closed_experiment_ids == []
    actions = [e.action for e in lab.store.events(campaign_id=campaign_id)]
    assert actions.count("experiments_interrupted") == 1
    assert verify_store(lab.store, None).ok


def test_recovery_leaves_open_the_experiments_the_runner_continues(lab: Lab) -> None:
    campaign_id, direction_id = _setup(lab.store)
    kept, other = (
        Experiment(campaign_id=campaign_id, direction_id=direction_id, description=d)
        for d in ("[exp:4] search", "[exp:5] search")
    )
    lab.store.commit(EventDraft(actor="t", role="worker", action="test"), [kept, other])
    lease = acquire_lease(lab.store, campaign_id)
    report = recover_campaign(lab.store, lease, keep_open=lambda e: e.id == kept.id)
    assert report.closed_experiment_ids == [other.id]
    assert not lab.store.get_as(kept.id, Experiment).is_finished()


def test_recovery_needs_the_lease(lab: Lab) -> None:
    campaign_id, _ = _setup(lab.store)
    running = _job(campaign_id, JobStatus.RUNNING)
    lab.store.commit(EventDraft(actor="t", role="controller", action="test"), [running])
    lease = acquire_lease(lab.store, campaign_id)
    lease.release()
    acquire_lease(lab.store, campaign_id)  # a live runner now holds it
    with pytest.raises(LeaseLost):
        recover_campaign(lab.store, lease)
    assert lab.store.get_as(running.id, Job).status is JobStatus.RUNNING


# --- Killed with SIGKILL, then resumed ----------------------------------------------------------


def _step(store: Store, lease: Lease, campaign_id: str, direction_id: str, n: int) -> None:
    """One side effect of the runner: create experiment ``n`` exactly once."""
    lease.check()
    key = f"exp:{direction_id}:{n}"
    step = begin(store, campaign_id, key, "create_experiment", {"n": n})
    if isinstance(step, DoneIntent):
        return
    exp = Experiment(
        campaign_id=campaign_id,
        direction_id=direction_id,
        description=key,
        config={"n": n, "attempt": step.attempts},
    )
    complete(store, step, {"experiment_id": exp.id}, writes=[exp])


_CHILD = f"""
import os, signal, sys
from rsilab.orchestrator.campaign._intents import DoneIntent, begin, complete
from rsilab.orchestrator.campaign._lease import Lease, acquire_lease
from rsilab.records import Experiment
from rsilab.store import Lab, Store

{textwrap.dedent(inspect.getsource(_step))}

lab_path, campaign_id, direction_id, die_at = sys.argv[1:5]
with Lab.open(lab_path) as lab:
    lease = acquire_lease(lab.store, campaign_id, ttl_s=60)
    with lease.keep_alive(0.02):
        for n in range({STEPS}):
            if n == int(die_at):  # killed between an intent and its side effect
                begin(lab.store, campaign_id, f"exp:{{direction_id}}:{{n}}", "create_experiment",
                      {{"n": n}})
                os.kill(os.getpid(), signal.SIGKILL)
            _step(lab.store, lease, campaign_id, direction_id, n)
        sys.stdin.read()  # all done: wait to be killed, like a runner between rounds
"""


def _done(store: Store, campaign_id: str) -> int:
    return len(store.query_as(Intent, campaign_id=campaign_id, fields={"state": "done"}))


def _run_until_killed(
    lab: Lab, ids: tuple[str, str], log: Path, *, kill_after: int, die_at: int = -1
) -> None:
    """Start the runner and SIGKILL it once ``kill_after`` steps are done (or it killed
    itself at step ``die_at``); never leave it running."""
    campaign_id, direction_id = ids
    argv = [sys.executable, "-c", _CHILD, str(lab.path), campaign_id, direction_id, str(die_at)]
    with (
        log.open("wb") as err,
        subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=err, stderr=err) as child,
    ):
        try:
            deadline = time.monotonic() + 15
            while _done(lab.store, campaign_id) < kill_after and child.poll() is None:
                assert time.monotonic() < deadline, f"runner too slow:\n{log.read_text()}"
                time.sleep(0.002)
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()  # reaped, so its pid is gone
    assert child.returncode == -signal.SIGKILL, log.read_text()


def _resume(lab: Lab, ids: tuple[str, str]) -> RecoveryReport:
    """Take over, recover, finish every step; check nothing was lost or repeated."""
    campaign_id, direction_id = ids
    lease = acquire_lease(lab.store, campaign_id, ttl_s=60)  # at once: its pid is dead
    assert lease.record.takeover.startswith("dead: process")
    report = recover_campaign(lab.store, lease, pending=pending_intents(lab.store, campaign_id))
    with lease:
        for n in range(STEPS):
            _step(lab.store, lease, campaign_id, direction_id, n)

    experiments = lab.store.query_as(Experiment, campaign_id=campaign_id)
    expected = [f"exp:{direction_id}:{n}" for n in range(STEPS)]
    assert sorted(e.description for e in experiments) == sorted(expected)
    intents = lab.store.query_as(Intent, campaign_id=campaign_id)
    assert len(intents) == STEPS
    assert all(i.state is IntentState.DONE for i in intents)
    assert {i.result["experiment_id"] for i in intents if i.result} == {e.id for e in experiments}
    for stale in report.pending:  # interrupted mid-step: re-run as its second attempt
        assert lab.store.get_as(stale.id, Intent).attempts == 2
    assert pending_intents(lab.store, campaign_id) == []
    assert verify_store(lab.store, None).ok
    return report


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_runner_killed_at_a_random_point_resumes_without_losing_or_repeating_work(
    lab: Lab, tmp_path: Path, seed: int
) -> None:
    ids = _setup(lab.store)
    kill_after = random.Random(seed).randint(1, STEPS // 2)
    _run_until_killed(lab, ids, tmp_path / "log", kill_after=kill_after)
    report = _resume(lab, ids)
    assert report.done_intents >= kill_after
    assert len(report.pending) <= 1  # the runner does one side effect at a time


def test_a_runner_killed_between_intent_and_effect_re_runs_that_step(
    lab: Lab, tmp_path: Path
) -> None:
    ids = _setup(lab.store)
    _run_until_killed(lab, ids, tmp_path / "log", kill_after=STEPS, die_at=7)
    report = _resume(lab, ids)
    assert [i.key for i in report.pending] == [f"exp:{ids[1]}:7"]
    assert report.done_intents == 7
