"""A controller job stopped from outside is not the candidate's failure.

Real controller jobs of the ``synthetic`` task run in the real sandbox, parked until the test's
operator (:mod:`tests.controller.held`) sends them a real signal from outside, or lets them run.
"""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from rsilab.controller.blame import EvaluationFault
from rsilab.controller.host import HostController
from rsilab.executors.local import LocalExecutor
from rsilab.records import Candidate, Job, JobKind, JobStatus, ProtocolFlag
from rsilab.store import Lab
from rsilab.tasks import Task
from tests.controller.held import Operator, hold
from tests.synthetic_configs import BETTER

MakeHarness = Callable[..., Path]


EMPTY = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
"""sha256 of no bytes: the model the model-use probe's predict is given."""


def _jobs(lab: Lab, candidate_id: str | None, kind: str, tree: str | None = None) -> list[Job]:
    """The controller's jobs of ``kind`` for a candidate (None: a baseline), of the harness
    tree ``tree`` when given (a candidate's evaluation also measures its head), the model-use
    probe's predict left out."""
    return [
        j
        for j in lab.store.query_as(Job)
        if j.candidate_id == candidate_id
        and j.kind == kind
        and j.actor == "controller"
        and tree in (None, j.inputs.workspace_sha256)
        and j.inputs.model_in_sha256 != EMPTY
    ]


def _propose(controller: HostController, lab: Lab, tree: Path) -> Candidate:
    sha = lab.artifacts.put_tree(tree).sha256
    return controller.propose(sha, campaign_id=None, proposer="worker-1")


def _held_candidate(
    controller: HostController, lab: Lab, make_harness: MakeHarness
) -> tuple[Candidate, str]:
    tree = make_harness(BETTER)
    token = hold(tree)
    return _propose(controller, lab, tree), token


def test_a_train_killed_from_outside_is_trained_again_with_the_same_seed(
    controller: HostController, lab: Lab, make_harness: MakeHarness
) -> None:
    controller.baseline()
    candidate, token = _held_candidate(controller, lab, make_harness)
    with Operator(token, {"train.py": [signal.SIGKILL]}).running() as operator:
        judged = controller.judge(candidate.id)
    assert ("train.py", signal.SIGKILL) in operator.acted
    assert judged.state == "accepted", judged.reason
    trains = _jobs(lab, candidate.id, "controller-train", candidate.harness_sha256)
    killed = [j for j in trains if j.status != JobStatus.SUCCEEDED]
    assert len(killed) == 1 and "signal 9" in killed[0].error
    again = [j for j in trains if j.status == JobStatus.SUCCEEDED]
    assert killed[0].inputs.seed in {j.inputs.seed for j in again}
    assert set(judged.seeds) == {j.inputs.seed for j in again}
    assert not lab.store.query_as(ProtocolFlag)  # nothing was held against it


def test_a_predict_killed_twice_runs_again_and_its_finished_train_is_reused(
    controller: HostController, lab: Lab, make_harness: MakeHarness
) -> None:
    controller.baseline()
    candidate, token = _held_candidate(controller, lab, make_harness)
    plan = {"predict.py": [signal.SIGKILL, signal.SIGTERM]}
    with Operator(token, plan).running() as operator:
        judged = controller.judge(candidate.id)
    assert [a for a in operator.acted if a[1] != signal.SIGUSR1] == [
        ("predict.py", signal.SIGKILL),
        ("predict.py", signal.SIGTERM),
    ]
    assert judged.state == "accepted", judged.reason
    predicts = _jobs(lab, candidate.id, "controller-predict", candidate.harness_sha256)
    assert len([j for j in predicts if j.status != JobStatus.SUCCEEDED]) == 2
    trains = Counter(
        j.inputs.seed
        for j in _jobs(lab, candidate.id, "controller-train", candidate.harness_sha256)
    )
    assert set(trains.values()) == {1}, trains  # no seed was trained twice


def test_a_candidate_that_sigkills_itself_is_never_accepted_nor_decided(
    controller: HostController, lab: Lab, make_harness: MakeHarness
) -> None:
    controller.baseline()
    train = (Path(controller.task.harness) / "train.py").read_text()
    suicide = "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n" + train
    candidate = _propose(controller, lab, make_harness(BETTER, **{"train.py": suicide}))
    with pytest.raises(EvaluationFault) as caught:
        controller.judge(candidate.id)
    assert "3 times" in str(caught.value) and "SIGKILL" in str(caught.value)
    after = lab.store.get_as(candidate.id, Candidate)
    assert after.state == "pending" and after.reason.startswith("undecided")
    assert "SIGKILL" in after.public_note and not after.seeds
    per_seed = Counter(
        j.inputs.seed
        for j in _jobs(lab, candidate.id, "controller-train", candidate.harness_sha256)
    )
    assert per_seed and set(per_seed.values()) == {3}  # three attempts, then an error
    assert not lab.store.query_as(ProtocolFlag)
    # judged again later (a resume): the same bounded attempts, still undecided
    assert controller.judge_safely(candidate.id).state == "pending"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("prefix", "failed"),
    [
        ("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", "signal 11"),
        ("import sys\nsys.exit(3)\n", "exited with 3"),
    ],
)
def test_a_crash_of_its_own_is_the_candidates_failure(
    controller: HostController, lab: Lab, make_harness: MakeHarness, prefix: str, failed: str
) -> None:
    controller.baseline()
    train = (Path(controller.task.harness) / "train.py").read_text()
    candidate = _propose(controller, lab, make_harness(BETTER, **{"train.py": prefix + train}))
    judged = controller.judge(candidate.id)
    assert judged.state == "invalid" and failed in judged.reason
    per_seed = Counter(
        j.inputs.seed
        for j in _jobs(lab, candidate.id, "controller-train", candidate.harness_sha256)
    )
    assert set(per_seed.values()) == {1}  # never run again
    assert [f.rule for f in lab.store.query_as(ProtocolFlag)] == ["candidate_invalid"]


def test_a_baseline_that_keeps_being_killed_is_an_error_and_resumes_what_is_missing(
    lab: Lab, make_harness: MakeHarness, synthetic: Task, executor: LocalExecutor
) -> None:
    tree = make_harness()
    token = hold(tree)
    held = HostController(lab, synthetic.model_copy(update={"harness": tree}), executor)
    kills = [signal.SIGKILL, signal.SIGHUP, signal.SIGKILL]
    with Operator(token, {"predict.py": kills}).running(), pytest.raises(EvaluationFault) as caught:
        held.baseline()
    assert "SIGHUP" in str(caught.value) and "resume" in caught.value.hint
    first = {j.id for j in lab.store.query_as(Job) if j.status == JobStatus.SUCCEEDED}
    assert first, "no seed finished before the error"
    with Operator(token, {}).running():
        version = held.baseline()
    assert len(version.seeds) == 6
    trains = Counter(j.inputs.seed for j in _jobs(lab, None, "controller-train"))
    assert set(trains) == set(version.seeds) and set(trains.values()) == {1}
    succeeded = [j for j in lab.store.query_as(Job) if j.status == JobStatus.SUCCEEDED]
    per_key = Counter((j.kind, j.inputs.seed, j.inputs.model_in_sha256) for j in succeeded)
    assert set(per_key.values()) == {1}  # nothing that had finished ran again
    assert first <= {j.id for j in succeeded}
    assert all(j.kind in (JobKind.CONTROLLER_TRAIN, JobKind.CONTROLLER_PREDICT) for j in succeeded)
