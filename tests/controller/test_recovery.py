"""Recovery of controller work a dead process left: jobs, candidates, baselines, folders.

Most tests write the records a killed process leaves (a candidate ``evaluating``, its jobs
``running``) and no claim held, which is what a kill leaves; a live owner is played by a
separate process holding the lock file (named here by its literal path), and one test kills
a real judging process.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rsilab.controller.host import HostController
from rsilab.controller.jobs import JobRecorder, new_job
from rsilab.controller.recovery import recover_controller_work
from rsilab.records import (
    Candidate,
    CandidateState,
    EventDraft,
    Job,
    JobInputs,
    JobKind,
    JobStatus,
    Role,
)
from rsilab.sandbox.owners import owner_of
from rsilab.store import Lab
from tests.controller.held import Operator, hold
from tests.synthetic_configs import BETTER

MakeHarness = Callable[..., Path]
SHA = "0" * 64


def _left_evaluating(lab: Lab, *, reason: str = "", campaign_id: str | None = None) -> Candidate:
    candidate = Candidate(
        task="synthetic",
        parent_version_id="ver-000000000000",
        harness_sha256=SHA,
        proposer="worker-1",
        campaign_id=campaign_id,
        state=CandidateState.EVALUATING,
        reason=reason,
    )
    lab.store.commit(
        EventDraft(actor="controller", role="controller", action="candidate_updated"), [candidate]
    )
    return candidate


def _left_running(
    lab: Lab, candidate_id: str | None, seed: int, campaign_id: str | None = None
) -> Job:
    job = new_job(
        JobKind.CONTROLLER_TRAIN,
        JobInputs(workspace_sha256=SHA, seed=seed),
        campaign_id=campaign_id,
        actor="controller",
        candidate_id=candidate_id,
    )
    recorder = JobRecorder(lab.store, "controller", Role.CONTROLLER)
    return recorder.started(job.model_copy(update={"status": JobStatus.RUNNING}))


def _status(lab: Lab, job: Job) -> str:
    return str(lab.store.get_as(job.id, Job).status)


def _candidate(lab: Lab, candidate: Candidate) -> Candidate:
    return lab.store.get_as(candidate.id, Candidate)


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[Callable[[Path, bool], None]]:
    """Start a live process that holds a lock file (exclusive, or shared) until the test ends."""
    started: list[subprocess.Popen[str]] = []

    def hold(path: Path, shared: bool = False) -> None:
        op = "fcntl.LOCK_SH" if shared else "fcntl.LOCK_EX"
        code = (
            "import fcntl, os, sys\n"
            f"os.makedirs({str(path.parent)!r}, exist_ok=True)\n"
            f"fd = os.open({str(path)!r}, os.O_RDWR | os.O_CREAT)\n"
            f"fcntl.flock(fd, {op})\n"
            "print('held', flush=True)\n"
            "sys.stdin.read()\n"
        )
        child = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        started.append(child)
        assert child.stdout is not None and child.stdout.readline() == "held\n"

    yield hold
    for child in started:
        child.kill()
        child.wait()
        for stream in (child.stdin, child.stdout):
            if stream is not None:
                stream.close()


def _held_elsewhere(path: Path) -> bool:
    """Whether a lock on ``path`` is held by someone (another open file, here or elsewhere)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


# --- state written as a kill leaves it ---------------------------------------------------------


def test_a_dead_judges_jobs_are_interrupted_and_its_candidate_set_back(lab: Lab) -> None:
    candidate = _left_evaluating(lab)
    jobs = [_left_running(lab, candidate.id, seed) for seed in (11, 22)]
    report = recover_controller_work(lab, None)
    assert [_status(lab, j) for j in jobs] == ["interrupted", "interrupted"]
    assert set(report.interrupted_job_ids) == {j.id for j in jobs}
    left = _candidate(lab, candidate)
    assert left.state == "pending"  # no controller given: left for a caller to judge
    assert left.reason.startswith("interrupted")
    assert report.pending_ids == [candidate.id]
    head = lab.store.head()
    again = recover_controller_work(lab, None)  # nothing left to repair
    assert lab.store.head() == head
    assert again.interrupted_job_ids == [] and again.rejected_ids == []


def test_a_candidate_interrupted_a_second_time_is_rejected(lab: Lab) -> None:
    candidate = _left_evaluating(lab)
    recover_controller_work(lab, None)  # the first interruption: set back to pending
    retried = _candidate(lab, candidate).model_copy(update={"state": CandidateState.EVALUATING})
    lab.store.commit(
        EventDraft(actor="controller", role="controller", action="candidate_updated"), [retried]
    )
    job = _left_running(lab, candidate.id, 33)
    report = recover_controller_work(lab, None)
    done = _candidate(lab, candidate)
    assert done.state == "rejected" and done.finished_at is not None
    assert "interrupted twice" in done.reason and "interrupted twice" in done.public_note
    assert report.rejected_ids == [candidate.id]
    assert _status(lab, job) == "interrupted"


def test_a_live_judge_is_left_alone(lab: Lab, holder: Callable[[Path, bool], None]) -> None:
    candidate = _left_evaluating(lab)
    job = _left_running(lab, candidate.id, 44)
    holder(lab.path / "locks" / f"candidate-{candidate.id}.lock", False)
    report = recover_controller_work(lab, None)
    assert report.live_ids == [candidate.id]
    assert _status(lab, job) == "running"
    assert _candidate(lab, candidate).state == "evaluating"


def test_only_the_named_campaign_is_touched(lab: Lab) -> None:
    mine = _left_evaluating(lab, campaign_id="cmp-aaaaaaaaaaaa")
    other = _left_evaluating(lab, campaign_id="cmp-bbbbbbbbbbbb")
    lab_level = _left_evaluating(lab)
    jobs = {c.id: _left_running(lab, c.id, 5, c.campaign_id) for c in (mine, other, lab_level)}
    report = recover_controller_work(lab, "cmp-aaaaaaaaaaaa")
    assert report.pending_ids == [mine.id]
    assert _status(lab, jobs[mine.id]) == "interrupted"
    assert _status(lab, jobs[other.id]) == "running"
    assert _status(lab, jobs[lab_level.id]) == "running"
    assert _candidate(lab, other).state == _candidate(lab, lab_level).state == "evaluating"


def test_dead_baselines_jobs_are_interrupted_unless_a_baseline_runs(
    lab: Lab, holder: Callable[[Path, bool], None]
) -> None:
    baseline_job = _left_running(lab, None, 7)
    holder(lab.path / "locks" / "baseline.lock", True)  # a live baseline elsewhere
    report = recover_controller_work(lab, None)
    assert report.baseline_live and _status(lab, baseline_job) == "running"


def test_dead_baselines_jobs_are_interrupted(lab: Lab) -> None:
    baseline_job = _left_running(lab, None, 7)
    in_a_campaign = _left_running(lab, None, 8, campaign_id="cmp-cccccccccccc")
    report = recover_controller_work(lab, None)
    assert not report.baseline_live
    assert _status(lab, baseline_job) == "interrupted"
    assert _status(lab, in_a_campaign) == "running"  # its campaign's recovery decides


# --- with a controller: judged again ------------------------------------------------------------


def test_a_recovered_candidate_is_judged_and_judging_holds_its_claim(
    controller: HostController, lab: Lab, make_harness: MakeHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = _left_running(lab, None, 9)  # a dead baseline's job
    held_during_baseline: list[bool] = []
    held_while_evaluating: list[bool] = []
    real_commit = lab.store.commit

    def watching(draft: EventDraft, writes: object = ()) -> object:
        records = list(writes)  # type: ignore[call-overload]
        if draft.action == "baseline":
            held_during_baseline.append(_held_elsewhere(lab.path / "locks" / "baseline.lock"))
        for r in records:
            if isinstance(r, Candidate) and r.state is CandidateState.EVALUATING:
                lock = lab.path / "locks" / f"candidate-{r.id}.lock"
                held_while_evaluating.append(_held_elsewhere(lock))
        return real_commit(draft, records)

    monkeypatch.setattr(lab.store, "commit", watching)
    controller.baseline()
    assert _status(lab, stale) == "interrupted"  # the baseline repaired it before starting
    assert held_during_baseline == [True]

    sha = lab.artifacts.put_tree(make_harness(BETTER)).sha256
    proposed = controller.propose(sha, campaign_id=None, proposer="worker-1")
    evaluating = proposed.model_copy(update={"state": CandidateState.EVALUATING})
    real_commit(EventDraft(actor="controller", role="controller", action="x"), [evaluating])
    report = recover_controller_work(lab, None, controller=controller)
    judged = _candidate(lab, proposed)
    assert judged.is_finished() and report.rejudged == {proposed.id: str(judged.state)}
    assert judged.state == "accepted", judged.reason
    assert held_while_evaluating and all(held_while_evaluating)
    assert not (lab.path / "locks" / f"candidate-{proposed.id}.lock").exists()

    held_while_evaluating.clear()  # a judge outside recovery holds the claim too
    again = controller.propose(sha, campaign_id=None, proposer="worker-1")
    assert controller.judge(again.id).is_finished()
    assert held_while_evaluating and all(held_while_evaluating)
    assert not (lab.path / "locks" / f"candidate-{again.id}.lock").exists()


def test_a_killed_judge_is_judged_again_with_the_same_seeds(
    controller: HostController,
    lab: Lab,
    make_harness: MakeHarness,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The judge's temporary folders go to a folder of this test's own, so no other test's
    # sweep of dead processes' folders (run in parallel) can remove them before we look.
    private = tmp_path / "judge-tmp"
    private.mkdir()
    controller.baseline()
    train = (Path(controller.task.harness) / "train.py").read_text()
    slow = make_harness(BETTER, **{"train.py": "import time\ntime.sleep(1)\n" + train})
    candidate = controller.propose(
        lab.artifacts.put_tree(slow).sha256, campaign_id=None, proposer="worker-1"
    )
    child = _judge_in_a_process(lab, candidate.id, private)
    try:
        deadline = time.monotonic() + 60
        while not _running_jobs(lab, candidate.id):
            assert child.poll() is None and time.monotonic() < deadline, "no job started"
            time.sleep(0.01)
    finally:
        _kill_group(child)
    dead = [j.inputs.seed for j in _running_jobs(lab, candidate.id)]
    leftovers = _folders_of(child.pid, private)
    assert leftovers, "the killed judge left no temporary folder to recover"
    monkeypatch.setattr(tempfile, "tempdir", str(private))  # where the recovery sweeps

    report = recover_controller_work(lab, None, controller=controller)
    judged = _candidate(lab, candidate)
    assert judged.is_finished() and candidate.id in report.rejudged
    retrained = [
        j.inputs.seed
        for j in lab.store.query_as(Job, fields={"candidate_id": candidate.id})
        if j.kind == JobKind.CONTROLLER_TRAIN and j.status == JobStatus.SUCCEEDED
    ]
    assert dead and set(dead) <= set(retrained) == set(judged.seeds)
    assert not _running_jobs(lab, candidate.id)
    assert _folders_of(child.pid, private) == []  # the dead judge's folders are gone


def _judge_in_a_process(lab: Lab, candidate_id: str, tmp: Path) -> subprocess.Popen[bytes]:
    code = (
        "import sys\n"
        "from rsilab.controller.host import HostController\n"
        "from rsilab.executors.local import LocalExecutor\n"
        "from rsilab.sandbox.select import default_sandbox\n"
        "from rsilab.store import Lab\n"
        "from rsilab.tasks import get_task\n"
        "lab = Lab.open(sys.argv[1])\n"
        "executor = LocalExecutor(default_sandbox(), lab.artifacts, slots=2)\n"
        "HostController(lab, get_task('synthetic'), executor).judge(sys.argv[2])\n"
    )
    argv = [sys.executable, "-c", code, str(lab.path), candidate_id]
    return subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "TMPDIR": str(tmp)},
    )


def _kill_group(child: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child and the helpers it started (``mount`` and the like, which would
    otherwise finish their work after it died), and wait until all are gone."""
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    deadline = time.monotonic() + 30
    while True:
        try:
            os.killpg(child.pid, 0)
        except ProcessLookupError:
            return
        assert time.monotonic() < deadline, "the killed judge's helpers do not end"
        time.sleep(0.01)


def _running_jobs(lab: Lab, candidate_id: str) -> list[Job]:
    return [
        j
        for j in lab.store.query_as(Job, fields={"candidate_id": candidate_id})
        if j.status == JobStatus.RUNNING
    ]


def _folders_of(pid: int, root: Path) -> list[Path]:
    return [p for p in root.iterdir() if (o := owner_of(p.name)) is not None and o.pid == pid]


def test_a_judge_killed_midway_is_judged_again_reusing_the_jobs_it_finished(
    controller: HostController, lab: Lab, make_harness: MakeHarness, tmp_path: Path
) -> None:
    private = tmp_path / "judge-tmp"
    private.mkdir()
    controller.baseline()
    tree = make_harness(BETTER)
    token = hold(tree)
    candidate = controller.propose(
        lab.artifacts.put_tree(tree).sha256, campaign_id=None, proposer="worker-1"
    )
    child = _judge_in_a_process(lab, candidate.id, private)
    try:
        with Operator(token, {}, release=2).running():  # two jobs run, the rest wait
            deadline = time.monotonic() + 120
            while len(_succeeded(lab, candidate)) < 2:
                assert child.poll() is None and time.monotonic() < deadline, "no job finished"
                time.sleep(0.01)
    finally:
        _kill_group(child)
    before = {j.id for j in _succeeded(lab, candidate)}

    with Operator(token, {}).running():
        report = recover_controller_work(lab, None, controller=controller)
    judged = _candidate(lab, candidate)
    assert judged.is_finished() and candidate.id in report.rejudged
    succeeded = _succeeded(lab, candidate)
    assert before <= {j.id for j in succeeded}
    per_key = Counter((j.kind, j.inputs.seed, j.inputs.model_in_sha256) for j in succeeded)
    assert set(per_key.values()) == {1}, per_key  # nothing that had finished ran again


def _succeeded(lab: Lab, candidate: Candidate) -> list[Job]:
    """The candidate's own controller jobs that succeeded (not its head's)."""
    return [
        j
        for j in lab.store.query_as(Job, fields={"candidate_id": candidate.id})
        if j.status == JobStatus.SUCCEEDED and j.inputs.workspace_sha256 == candidate.harness_sha256
    ]
