"""Paired seeds end to end on ``synthetic``: which seeds, who keeps them, the winner's curse."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rsilab.controller.comparison import comparison_seeds
from rsilab.controller.host import HostController
from rsilab.records import (
    BenchmarkDecision,
    CandidateState,
    Evaluation,
    Job,
    JobKind,
    SystemVersion,
)
from rsilab.store import Lab
from tests.synthetic_configs import BETTER

MakeHarness = Callable[..., Path]


def _reference_seeds(lab: Lab, version: SystemVersion) -> list[int]:
    seeds: list[int] = []
    for eval_id in version.reference_evaluation_ids:
        for sample in lab.store.get_as(eval_id, Evaluation).samples:
            if sample.seed is not None and sample.seed not in seeds:
                seeds.append(sample.seed)
    return seeds


def test_seeds_depend_on_secret_head_tree_and_proposal_only() -> None:
    head = SystemVersion(task="t", label="H0/M0", harness_sha256="a" * 64)
    twin = SystemVersion(task="t", label="H0/M0", harness_sha256="a" * 64)  # another lab's
    other = SystemVersion(task="t", label="H1/M0", harness_sha256="b" * 64)
    seeds = comparison_seeds(b"s" * 32, head, 1, 24)
    assert seeds == comparison_seeds(b"s" * 32, twin, 1, 24)  # common random numbers
    assert seeds[:3] == comparison_seeds(b"s" * 32, head, 1, 3)  # looks extend, never redraw
    assert len(set(seeds)) == 24
    for changed in (
        comparison_seeds(b"t" * 32, head, 1, 24),
        comparison_seeds(b"s" * 32, head, 2, 24),
        comparison_seeds(b"s" * 32, other, 1, 24),
    ):
        assert not set(changed) & set(seeds)


def test_candidate_and_head_share_seeds_and_a_new_head_is_measured_afresh(
    controller: HostController, lab: Lab, make_harness: MakeHarness
) -> None:
    v0 = controller.baseline()
    sha = lab.artifacts.put_tree(make_harness(BETTER)).sha256
    better = controller.judge(controller.propose(sha, campaign_id=None, proposer="t").id)
    assert better.state is CandidateState.ACCEPTED, better.reason
    k = len(better.seeds)
    assert k in (6, 12, 24)  # accepted at a look past the first
    assert better.seeds == comparison_seeds(controller.secret, v0, 1, k)
    head = lab.store.get_as(v0.id, SystemVersion)
    assert _reference_seeds(lab, head) == better.seeds  # the head trained on the same seeds
    head_trains = [
        j
        for j in lab.store.query_as(Job)
        if j.candidate_id == better.id
        and j.kind is JobKind.CONTROLLER_TRAIN
        and j.inputs.workspace_sha256 == v0.harness_sha256
    ]
    assert sorted(j.inputs.seed or 0 for j in head_trains) == sorted(better.seeds)  # once each
    assert not set(better.seeds) & set(v0.seeds)  # not the baseline's own seeds
    decision = better.decisions[0]
    assert (decision.seeds, decision.look) == (k, {6: 2, 12: 3, 24: 4}[k])
    # the new head never serves with the seeds it won on: the next proposal measures it afresh
    v1 = lab.store.get_as(better.version_id or "", SystemVersion)
    assert v1.reference_evaluation_ids == [] and v1.seeds == better.seeds
    copy = controller.judge(controller.propose(sha, campaign_id=None, proposer="t").id)
    assert copy.state is CandidateState.REJECTED and len(copy.seeds) == 3  # futile at look 1
    fresh = _reference_seeds(lab, lab.store.get_as(v1.id, SystemVersion))
    assert fresh == copy.seeds and not set(fresh) & set(v1.seeds)


def test_records_of_older_labs_still_load() -> None:
    version = SystemVersion.model_validate(
        {"id": "ver-000000000001", "label": "H0/M0", "harness_sha256": "a" * 64}
    )
    assert version.reference_evaluation_ids == []
    decision = BenchmarkDecision.model_validate(
        {"benchmark": "q", "target": True, "gain": 0.1, "low": 0.0, "high": 0.2,
         "level": 0.95, "threshold": 0.0, "passed": False}
    )  # fmt: skip
    assert (decision.look, decision.seeds, decision.critical) == (0, 0, None)
