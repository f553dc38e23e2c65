"""JobRecorder: the one writer of what jobs produce, one ledger event per write."""

from __future__ import annotations

from pathlib import Path

import pytest

from rsilab.controller.jobs import JobRecorder, new_job, recorded_success
from rsilab.errors import ConflictError
from rsilab.records import (
    DataTier,
    Evaluation,
    EventDraft,
    Experiment,
    ExperimentState,
    Job,
    JobInputs,
    JobKind,
    JobStatus,
    Resources,
    Role,
    SampleScore,
)
from rsilab.store import Lab, MemoryStore


def _recorder() -> JobRecorder:
    return JobRecorder(MemoryStore(), "worker-1", Role.WORKER)


def _evaluation(tier: DataTier, benchmark: str = "quality") -> Evaluation:
    return Evaluation(
        campaign_id="camp-0000001",
        benchmark=benchmark,
        tier=tier,
        subject_id="exp-0000001",
        metric="accuracy",
        samples=[SampleScore(sample_id="s1", epoch=0, seed=0, score=1.0)],
    )


def test_a_job_is_written_as_queued_started_and_finished_one_event_each() -> None:
    recorder = _recorder()
    job = Job(
        campaign_id="camp-0000001",
        kind=JobKind.TRAIN,
        inputs=JobInputs(workspace_sha256="0" * 64, seed=0),
    )
    recorder.queued(job)
    running = recorder.started(job.model_copy(update={"status": JobStatus.RUNNING}))
    used = Resources(cpu_s=1.0, wall_s=2.0)
    recorder.finished(running.model_copy(update={"status": JobStatus.SUCCEEDED, "resources": used}))
    events = recorder.store.events()
    assert [e.action for e in events] == ["job_queued", "job_started", "job_finished"]
    assert {(e.actor, e.role, e.campaign_id) for e in events} == {
        ("worker-1", "worker", "camp-0000001")
    }
    assert [[r.id for r in e.records] for e in events] == [[job.id]] * 3
    assert [e.cost for e in events] == [None, None, used]  # a job's cost once it ended
    assert recorder.store.get_as(job.id, Job).status is JobStatus.SUCCEEDED


@pytest.mark.parametrize(
    ("tier", "action"), [(DataTier.DEV, "dev_evaluated"), (DataTier.TRAIN, "fold_evaluated")]
)
def test_evaluations_are_written_together_named_by_their_tier(tier: DataTier, action: str) -> None:
    recorder = _recorder()
    scored = [_evaluation(tier, "quality"), _evaluation(tier, "robustness")]
    recorder.evaluated(scored, "job job-abcdef")
    (event,) = recorder.store.events()
    assert (event.action, event.actor, event.role) == (action, "worker-1", "worker")
    assert event.detail == "job job-abcdef: quality, robustness"
    assert sorted(r.id for r in event.records) == sorted(e.id for e in scored)


@pytest.mark.parametrize(
    "tiers",
    [[], [DataTier.DEV, DataTier.TRAIN], [DataTier.ACCEPT], [DataTier.FINAL]],
)
def test_no_evaluations_mixed_tiers_or_private_tiers_are_refused(tiers: list[DataTier]) -> None:
    recorder = _recorder()
    with pytest.raises(ValueError, match="one tier"):
        recorder.evaluated([_evaluation(t) for t in tiers], "job job-abcdef")
    assert recorder.store.events() == []


def test_an_experiment_is_started_once_and_synced_with_compare_and_swap() -> None:
    recorder = _recorder()
    exp = Experiment(campaign_id="camp-0000001", direction_id="dir-0000001", description="x")
    recorder.store.commit(EventDraft(actor="t", role="human", action="setup"), [exp])
    running = recorder.experiment_started(exp)
    assert running.state is ExperimentState.RUNNING
    assert recorder.experiment_started(running) is running  # already past created: no write
    synced = running.model_copy(update={"log_artifacts": ["a" * 64]})
    recorder.experiment_synced(synced)
    with pytest.raises(ConflictError):  # written from a stale read: another writer won
        recorder.experiment_synced(running.model_copy(update={"log_artifacts": []}))
    events = recorder.store.events()[1:]
    assert [e.action for e in events] == ["experiment_started", "experiment_synced"]
    assert events[0].detail == f"{exp.id} 'x' [created]"  # the experiment as it was
    assert events[1].detail == f"{exp.id} 'x' [running]"
    assert recorder.store.get_as(exp.id, Experiment).log_artifacts == ["a" * 64]


# --- reuse of a recorded controller job ----------------------------------------------------


def _predict(seed: int = 7, stdin: str = "a" * 64, candidate: str | None = "cand-1") -> Job:
    inputs = JobInputs(workspace_sha256="0" * 64, data_sha256={"stdin": stdin}, seed=seed)
    return new_job(
        JobKind.CONTROLLER_PREDICT,
        inputs,
        campaign_id=None,
        actor="controller",
        candidate_id=candidate,
    )


def _succeeded(lab: Lab, job: Job, stdout: bytes, actor: str = "controller") -> Job:
    recorder = JobRecorder(lab.store, actor, Role.CONTROLLER)
    running = recorder.started(job.model_copy(update={"status": JobStatus.RUNNING, "actor": actor}))
    sha = lab.artifacts.put_bytes(stdout).sha256
    done = running.model_copy(update={"status": JobStatus.SUCCEEDED, "stdout_sha256": sha})
    return recorder.finished(done)


def test_a_recorded_job_is_reused_only_for_the_same_key(tmp_path: Path) -> None:
    lab = Lab.init(tmp_path / "lab")
    try:
        first = _succeeded(lab, _predict(), b"first\n")
        _succeeded(lab, _predict(), b"second\n")  # a later success never replaces the first
        found = recorded_success(lab.store, lab.artifacts, _predict())
        assert found is not None and found.id == first.id
        for other in (_predict(seed=8), _predict(stdin="b" * 64), _predict(candidate="cand-2")):
            assert recorded_success(lab.store, lab.artifacts, other) is None
        agents = _predict(candidate="cand-3")
        _succeeded(lab, agents, b"an agent's\n", actor="worker-1")
        assert recorded_success(lab.store, lab.artifacts, agents) is None
    finally:
        lab.close()


def test_a_recorded_job_whose_output_is_gone_runs_again(tmp_path: Path) -> None:
    lab = Lab.init(tmp_path / "lab")
    try:
        done = _succeeded(lab, _predict(), b"collected\n")
        assert done.stdout_sha256 is not None
        lab.artifacts.blob_path(done.stdout_sha256).unlink()
        assert recorded_success(lab.store, lab.artifacts, _predict()) is None
    finally:
        lab.close()
