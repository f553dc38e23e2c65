"""The Host Controller's half of the dashboard's synthetic lab: baseline, candidates, versions.

:class:`_Controller` writes what the controller leaves in a campaign of the built-in policy:
the baseline ``H0/M0`` trained and evaluated on the private tiers before the campaign, and,
for each candidate a Worker proposes, its controller jobs and private evaluations, the
decision of the controller's own rule (:func:`~rsilab.controller.acceptance.decide`) and,
when accepted, the new version and the moved lineage. It keeps the head's config and accept
scores, which the research half reads to start directions and to choose proposals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks._dashboard_writer import PRIVATE, Key, _Writer
from rsilab.controller.acceptance import decide
from rsilab.controller.jobs import CONTROLLER_ACTOR
from rsilab.controller.lineage import next_label
from rsilab.records import (
    Candidate,
    CandidateState,
    DataTier,
    Evaluation,
    Experiment,
    Interval,
    Job,
    JobInputs,
    JobKind,
    Lineage,
    Record,
    Role,
    SystemVersion,
    new_id,
    utc_now,
)

BASELINE_SEEDS, CANDIDATE_SEEDS = 12, 12
# Both arms on 12 paired seeds, judged in one look at 12 (the controller's rule with a single
# look spends the proposal's whole alpha there): the generated lab's verdicts follow the rule
# without simulating every look of the sequential schedule.
LOOKS = (12,)


def _final_scores(evaluations: list[Evaluation]) -> dict[str, Interval]:
    """Per benchmark, the final tier's avg@k: what a version's ``scores`` hold."""
    return {
        e.benchmark: next(v for k, v in e.aggregates.items() if k.startswith("avg@"))
        for e in evaluations
        if e.tier is DataTier.FINAL
    }


@dataclass
class _Judged:
    """One controller evaluation: jobs, seeds, a model per seed, evaluations, accept scores."""

    jobs: list[Job]
    seeds: list[int]
    models: list[str]
    evaluations: list[Evaluation]
    accept: dict[Key, np.ndarray]


class _Controller:
    """The Host Controller's records: baseline, controller jobs, candidates, versions."""

    def __init__(self, w: _Writer) -> None:
        self.w = w
        self.versions: list[SystemVersion] = []
        self.head_accept: dict[Key, np.ndarray] = {}
        self.candidates: list[Candidate] = []
        self.lineage: Lineage | None = None
        self.head_config: dict[str, Any] = {}

    def _evaluate(
        self, subject: str, config: dict[str, Any], harness: str, candidate_id: str | None
    ) -> _Judged:
        w = self.w
        seeds = w.seeds(CANDIDATE_SEEDS if candidate_id else BASELINE_SEEDS)
        models, quality = w.train(config, len(seeds))
        campaign = {
            "candidate_id": candidate_id,
            "campaign_id": w.campaign_id if candidate_id else None,
        }
        jobs = []
        for seed, model in zip(seeds, models, strict=True):
            argv = ["python", "train.py", "--seed", str(seed)]
            inputs = JobInputs(workspace_sha256=harness, seed=seed, argv=argv)
            jobs.append(
                w.job(
                    JobKind.CONTROLLER_TRAIN,
                    inputs,
                    CONTROLLER_ACTOR,
                    model_out_sha256=model,
                    **campaign,
                )
            )
            inputs = inputs.model_copy(
                update={"model_in_sha256": model, "argv": ["python", "predict.py"]}
            )
            jobs.append(w.job(JobKind.CONTROLLER_PREDICT, inputs, CONTROLLER_ACTOR, **campaign))
        matrices = {(b, t): w.scores((b, t), quality[b]) for b in w.benches for t in PRIVATE}
        evals = [
            w.evaluation(subject, k, m, seeds, candidate_id is not None)
            for k, m in matrices.items()
        ]
        accept = {k: m for k, m in matrices.items() if k[1] is DataTier.ACCEPT}
        return _Judged(jobs, seeds, models, evals, accept)

    def baseline(self) -> None:
        """H0/M0, the task's own harness, evaluated before the campaign (no campaign id)."""
        w = self.w
        version_id = new_id(SystemVersion.PREFIX)
        judged = self._evaluate(version_id, w.task.default_config(), w.harness, None)
        version = SystemVersion(
            id=version_id,
            task=w.task.name,
            label="H0/M0",
            harness_sha256=w.harness,
            model_sha256=judged.models[0],
            model_sha256s=judged.models,
            seeds=judged.seeds,
            scores=_final_scores(judged.evaluations),
            evaluation_ids=[e.id for e in judged.evaluations],
            decision="baseline: the task's initial system",
        )
        lineage = Lineage(task=w.task.name, head_id=version.id, versions=[version.id])
        w.commit("jobs_finished", list(judged.jobs), actor=CONTROLLER_ACTOR, detail="baseline")
        writes: list[Record] = [*judged.evaluations, version, lineage]
        w.commit("baseline", writes, actor=CONTROLLER_ACTOR, detail=f"{w.task.name}/main H0/M0")
        self.versions, self.head_accept, self.lineage = [version], judged.accept, lineage
        self.head_config = w.task.default_config()

    def judge(self, exp: Experiment, config: dict[str, Any]) -> None:
        """A Worker proposes ``exp``'s workspace; the controller decides it by its rule."""
        w, head, lineage = self.w, self.versions[-1], self.lineage
        assert exp.workspace_hash is not None and lineage is not None
        candidate = Candidate(
            campaign_id=w.campaign_id,
            task=w.task.name,
            parent_version_id=head.id,
            harness_sha256=exp.workspace_hash,
            experiment_id=exp.id,
            proposer=exp.created_by,
            proposal_index=len(self.candidates) + 1,
        )
        w.tool_call(exp.created_by, Role.WORKER, "propose_candidate", {"id": exp.id}, [candidate])
        judged = self._evaluate(candidate.id, config, exp.workspace_hash, candidate.id)
        writes: list[Record] = [*judged.jobs, *judged.evaluations]
        w.commit("candidate_evaluated", writes, actor=CONTROLLER_ACTOR, detail=candidate.id)
        index = candidate.proposal_index
        decision = decide(
            w.task, judged.accept, self.head_accept, proposal_index=index, looks=LOOKS
        )
        update: dict[str, Any] = {
            "decisions": decision.decisions,
            "alpha": decision.alpha,
            "compared_to": head.id,
            "reason": decision.reason,
            "finished_at": utc_now(),
            "seeds": judged.seeds,
            "evaluation_ids": [e.id for e in judged.evaluations],
        }
        if not decision.accepted:
            done = candidate.model_copy(update={**update, "state": CandidateState.REJECTED})
            w.commit("candidate_rejected", [done], actor=CONTROLLER_ACTOR, detail=done.summary())
            self.candidates.append(done)
            return
        version = SystemVersion(
            task=w.task.name,
            label=next_label(self.versions, candidate.harness_sha256, judged.models),
            harness_sha256=candidate.harness_sha256,
            model_sha256=judged.models[0],
            model_sha256s=judged.models,
            seeds=judged.seeds,
            parent_id=head.id,
            candidate_id=candidate.id,
            scores=_final_scores(judged.evaluations),
            evaluation_ids=update["evaluation_ids"],
            decision=decision.reason,
        )
        update |= {"state": CandidateState.ACCEPTED, "version_id": version.id}
        done = candidate.model_copy(update=update)
        moved = lineage.model_copy(
            update={"head_id": version.id, "versions": [*lineage.versions, version.id]}
        )
        detail = f"{done.id} -> {version.label}"
        w.commit(
            "candidate_accepted", [done, version, moved], actor=CONTROLLER_ACTOR, detail=detail
        )
        self.candidates.append(done)
        self.versions.append(version)
        self.head_accept, self.lineage, self.head_config = judged.accept, moved, config
