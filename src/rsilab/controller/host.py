"""The Host Controller: baseline, proposals, guards, independent evaluation, acceptance.

One :class:`HostController` serves one (task, lineage) in one lab. It is the only writer of
counted scores. Order of work for a proposal (:meth:`HostController.judge`):

1. proposal cap (a campaign's proposals are numbered; past the cap a proposal is rejected);
2. validity: the stored tree materialises, holds no link out of itself, and has a manifest;
   an invalid candidate is flagged too (``link_leaves_harness``, ``candidate_invalid``);
3. training-stage guards: no private item and no copy of a declared raw source in the tree,
   the registered data it names or the host files it names (the content guard,
   :mod:`rsilab.controller.content`: containers opened, every serialisation read, exact and
   near-duplicate items), nothing the guard cannot open within its caps; no weights file
   that a recorded job did not produce; no dropped train step where the lineage's head
   trains (``training_dropped``);
4. the evaluator's code and the private data hash as they did at baseline;
5. re-training with the controller's own seeds and scoring both private tiers, plus the
   model-use probe when the head trains (see :mod:`rsilab.controller.evaluation`);
6. the model-use checks (:mod:`rsilab.controller.model_use`): every controller seed gave the
   same predictions on the private tiers, or one model, while the parent's scores vary
   across its seeds (``seed_ignored``: train ignores ``--seed``, so the seed spread the
   acceptance rule relies on is gone), or predict answered alike with the model emptied
   (``model_ignored``); either is flagged and the candidate rejected, not counted;
7. the acceptance rule on the accept tier against the lineage's *current* head (a candidate
   built from a superseded version is judged against the head; its parent stays recorded),
   then a compare-and-swap on the lineage. Reported scores are final-tier scores.

Every detection is a :class:`~rsilab.records.ProtocolFlag`; every decision stores its reason.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from threading import Lock

import numpy as np

from rsilab.controller.blame import EvaluationFault
from rsilab.controller.comparison import Comparison, HeadReference, compare, comparison_seeds
from rsilab.controller.evaluation import (
    Recipe,
    SystemEvaluation,
    SystemEvaluator,
    SystemInvalid,
    controller_seeds,
)
from rsilab.controller.guards import (
    TrainingGuards,
    evaluator_sha256,
    private_data_sha256,
)
from rsilab.controller.jobs import CONTROLLER_ACTOR
from rsilab.controller.lineage import (
    find_lineage,
    lineage_versions,
    next_label,
    require_lineage,
)
from rsilab.controller.model_use import model_use_check
from rsilab.controller.overlap import PrivateIndex
from rsilab.controller.recovery import (
    holds_baseline_claim,
    holds_candidate_claim,
)
from rsilab.controller.sequential import looks_from
from rsilab.errors import ConflictError, UserError
from rsilab.executors.base import Executor
from rsilab.records import (
    Candidate,
    CandidateState,
    Dataset,
    DataTier,
    Evaluation,
    EventDraft,
    FlagStage,
    Interval,
    Lineage,
    ProtocolFlag,
    Record,
    Role,
    SampleScore,
    SystemVersion,
    utc_now,
)
from rsilab.sandbox.base import Limits
from rsilab.stats import avg_at_k, pass_at_k
from rsilab.store.base import Store
from rsilab.store.lab import Lab
from rsilab.tasks import Task, checked_lab_secret

log = logging.getLogger(__name__)

UNDECIDED_REASON = "undecided: the controller's evaluation failed for a cause outside it"
"""How the reason of a candidate left pending by an EvaluationFault starts."""
DEFAULT_SEEDS = 3
DEFAULT_MAX_PROPOSALS = 25
_CAS_ATTEMPTS = 5


class HostController:
    """What counts, for one (task, lineage) in one lab. Thread-safe for :meth:`judge`."""

    def __init__(
        self,
        lab: Lab,
        task: Task,
        executor: Executor,
        *,
        lineage: str = "main",
        seeds: int = DEFAULT_SEEDS,
        baseline_seeds: int | None = None,
        alpha: float = 0.05,
        max_proposals: int = DEFAULT_MAX_PROPOSALS,
        limits: Limits | None = None,
    ) -> None:
        if seeds < 1:
            raise ValueError("the controller needs at least one seed")
        self.lab = lab
        self.task = task
        self.lineage = lineage
        self.seeds = seeds
        # the looks of a comparison: 1, 2, 4, 8 and 12 times ``seeds`` (3/6/12/24/36 by default)
        self.looks = looks_from(seeds)
        # The baseline is evaluated once and every candidate is compared with it, so extra
        # seeds there are cheap and shrink the interval of every comparison (its seed spread
        # enters each paired gain as s_b^2 / k_b).
        self.baseline_seeds = baseline_seeds if baseline_seeds is not None else 2 * seeds
        self.alpha = alpha
        self.max_proposals = max_proposals
        # a lab that evaluated a version drew its private tiers with the secret: never a new one
        drawn = bool(lab.store.query_as(SystemVersion, limit=1))
        self.secret = checked_lab_secret(lab, create=not drawn)
        self.evaluator = SystemEvaluator(
            task, self.secret, lab.store, lab.artifacts, executor, limits=limits
        )
        self.guards = TrainingGuards(task, self.secret, lab.store, lab.artifacts)
        self.reference = HeadReference(task, lab.store, self.evaluator, self._version_recipe)
        self._propose_lock = Lock()

    @property
    def store(self) -> Store:
        """The lab's store."""
        return self.lab.store

    # --- fingerprints ---------------------------------------------------------------------

    def private_data_sha256(self) -> str:
        """Hash of every private sample of every benchmark (ids, inputs, targets)."""
        return private_data_sha256(self.evaluator)

    def evaluator_sha256(self) -> str:
        """Hash of the code that scores: every benchmark's scorer and the predict driver."""
        return evaluator_sha256(self.task)

    def changed_inputs(self, lineage: Lineage) -> list[tuple[str, str]]:
        """What differs from ``lineage``'s baseline, as (flag rule, what) pairs: its private
        tiers, its scorers or predict driver; empty when both are as they were."""
        changed = []
        if (
            lineage.private_data_sha256
            and lineage.private_data_sha256 != self.private_data_sha256()
        ):
            changed.append(("private_data_changed", "the private tiers"))
        if lineage.evaluator_sha256 and lineage.evaluator_sha256 != self.evaluator_sha256():
            changed.append(("evaluator_changed", "the scorers or the predict driver"))
        return changed

    def check_fingerprints(self, lineage: Lineage) -> None:
        """Refuse to evaluate when the scorers or the private data changed since baseline.

        Raises:
            UserError: naming what changed (a flag is recorded too).
        """
        changed = self.changed_inputs(lineage)
        for rule, what in changed:
            self._flag(FlagStage.EVALUATION, rule, f"{what} differ from the baseline's", None)
        if changed:
            raise UserError(
                "the evaluation inputs changed since the baseline: "
                + ", ".join(w for _, w in changed),
                "scores would not be comparable; start a new lineage (--lineage NAME)",
            )

    # --- baseline -------------------------------------------------------------------------

    @holds_baseline_claim
    def baseline(self, *, actor: str = "cli") -> SystemVersion:
        """Evaluate the task's initial system and store it as the lineage's first version.

        Raises:
            EvaluationFault: its jobs kept failing for causes outside the system; nothing is
                recorded but the jobs, which a new attempt reuses.
            UserError: the lineage already exists, or the initial system is invalid.
        """
        if find_lineage(self.store, self.task.name, self.lineage) is not None:
            raise UserError(
                f"{self.task.name}/{self.lineage} already has a baseline",
                f"see it with: rsilab versions {self.task.name} --lineage {self.lineage}",
            )
        harness = self.lab.artifacts.put_tree(self.task.harness, leave_out_caches=True).sha256
        subject = f"baseline/{self.task.name}/{self.lineage}"
        seeds = controller_seeds(self.secret, subject, self.baseline_seeds)
        try:
            result = self.evaluator.evaluate(
                Recipe(harness), seeds, campaign_id=None, candidate_id=None
            )
        except SystemInvalid as exc:
            raise UserError(
                f"the initial system of {self.task.name!r} is invalid: {exc.reason}",
                f"check it with: rsilab task check {self.task.argument}",
            ) from None
        version = SystemVersion(
            task=self.task.name,
            lineage=self.lineage,
            label="H0/M0",
            harness_sha256=harness,
            model_sha256=result.models[0],
            model_sha256s=[m or "" for m in result.models],
            seeds=seeds,
            decision="baseline: the task's initial system",
        )
        evaluations = self._evaluations(version.id, None, result)
        version.evaluation_ids = [e.id for e in evaluations]
        version.scores = _final_scores(evaluations)
        lineage = Lineage(
            task=self.task.name,
            name=self.lineage,
            head_id=version.id,
            versions=[version.id],
            private_data_sha256=self.private_data_sha256(),
            evaluator_sha256=self.evaluator_sha256(),
        )
        try:
            self._commit(
                "baseline",
                f"{self.task.name}/{self.lineage} {version.label}",
                None,
                [*evaluations, version, lineage],
            )
        except ConflictError:
            # another process (a second `rsilab run` started at the same moment on a fresh
            # lab) recorded the lineage's baseline first: that one is the baseline
            found = find_lineage(self.store, self.task.name, self.lineage)
            if found is None:
                raise
            return self.store.get_as(found.versions[0], SystemVersion)
        return version

    # --- proposals ------------------------------------------------------------------------

    def propose(
        self,
        harness_sha256: str,
        *,
        campaign_id: str | None,
        proposer: str,
        parent_version_id: str | None = None,
        experiment_id: str | None = None,
        data_ids: Sequence[str] = (),
        warm_start: bool = False,
    ) -> Candidate:
        """Record a pending candidate (numbered within its campaign). Judge it with
        :meth:`judge`.

        Raises:
            UserError: the lineage has no baseline, or the parent is not one of its versions.
        """
        lineage = require_lineage(self.store, self.task.name, self.lineage)
        parent = parent_version_id or lineage.head_id
        if parent not in lineage.versions:
            raise UserError(f"{parent} is not a version of {self.task.name}/{self.lineage}")
        with self._propose_lock:
            earlier = self.store.query_as(
                Candidate, fields={"task": self.task.name, "lineage": self.lineage}
            )
            index = 1 + sum(1 for c in earlier if c.campaign_id == campaign_id)
            candidate = Candidate(
                campaign_id=campaign_id,
                task=self.task.name,
                lineage=self.lineage,
                parent_version_id=parent,
                harness_sha256=harness_sha256,
                experiment_id=experiment_id,
                data_ids=list(data_ids),
                warm_start=warm_start,
                proposer=proposer,
                proposal_index=index,
            )
            self._commit("candidate_proposed", candidate.summary(), campaign_id, [candidate])
        return candidate

    @holds_candidate_claim
    def judge(self, candidate_id: str) -> Candidate:
        """Decide a pending candidate (see the module docstring); returns it decided.

        Never raises for a bad candidate: it ends invalid or rejected with its reason.

        Raises:
            EvaluationFault: the controller's jobs kept failing for causes outside the
                candidate (:mod:`rsilab.controller.blame`); the candidate is recorded
                ``pending`` again with :data:`UNDECIDED_REASON`, for a resume to judge.
            UserError: the candidate is not pending, or the evaluation inputs changed.
            LabError: the lab could not be written.
        """
        candidate = self.store.get_as(candidate_id, Candidate)
        if candidate.state is not CandidateState.PENDING:
            raise UserError(f"candidate {candidate.id} is {candidate.state}, not pending")
        lineage = require_lineage(self.store, self.task.name, self.lineage)
        self.check_fingerprints(lineage)
        candidate = self._update(candidate, state=CandidateState.EVALUATING)
        if candidate.proposal_index > self.max_proposals:
            return self._finish(
                candidate,
                CandidateState.REJECTED,
                f"the campaign's proposal cap ({self.max_proposals}) is reached",
            )
        head = self.store.get_as(lineage.head_id, SystemVersion)
        refusal = self.guards.check(candidate, head_harness_sha256=head.harness_sha256)
        if refusal is not None:
            self._flag(refusal.stage, refusal.rule, refusal.detail, candidate)
            return self._finish(candidate, refusal.state, refusal.reason, refusal.public)
        try:
            recipe = self._recipe(candidate)
        except SystemInvalid as exc:
            self._flag(FlagStage.EVALUATION, "candidate_invalid", exc.public, candidate)
            return self._finish(candidate, CandidateState.INVALID, exc.reason, exc.public)
        return self._decide(candidate, recipe)

    def _compare(
        self, candidate: Candidate, recipe: Recipe, head: SystemVersion
    ) -> tuple[Candidate, Comparison | None]:
        """Run the paired sequential comparison with ``head`` and record the candidate's
        evaluations; the candidate ends decided (invalid, or flagged and rejected) when the
        comparison cannot be used, with None in place of it."""
        seeds = comparison_seeds(self.secret, head, candidate.proposal_index, self.looks[-1])
        try:
            judged = compare(
                candidate,
                recipe,
                head,
                seeds=seeds,
                looks=self.looks,
                alpha=self.alpha,
                evaluator=self.evaluator,
                reference=self.reference,
                model_use=lambda result: self._model_use(candidate, result),
            )
        except SystemInvalid as exc:
            # A controller job that fails counts against the candidate, with a flag: its
            # detail is the public step, since the reason may quote private logs.
            self._flag(FlagStage.EVALUATION, "candidate_invalid", exc.public, candidate)
            return self._finish(candidate, CandidateState.INVALID, exc.reason, exc.public), None
        except EvaluationFault as exc:
            # not the candidate's doing: nothing is decided, and no flag raised against it
            self._update(
                candidate,
                state=CandidateState.PENDING,
                reason=f"{UNDECIDED_REASON}: {exc.message}",
                public_note=f"{UNDECIDED_REASON}: {exc.message}",
            )
            raise
        result = judged.result
        evaluations = self._evaluations(candidate.id, candidate.campaign_id, result)
        self._commit("candidate_evaluated", candidate.id, candidate.campaign_id, evaluations)
        # the seeds are recorded with the verdict, never before: no agent may learn them early
        candidate = candidate.model_copy(
            update={"seeds": result.seeds, "evaluation_ids": [e.id for e in evaluations]}
        )
        if judged.detected is not None:
            stage, rule, detail, public = judged.detected
            self._flag(stage, rule, detail, candidate)
            return self._finish(candidate, CandidateState.REJECTED, detail, public), None
        return candidate, judged

    def _model_use(
        self, candidate: Candidate, result: SystemEvaluation
    ) -> tuple[FlagStage, str, str, str] | None:
        """(stage, rule, detail, public note) of a model-use check ``result`` fails, or None
        (see :mod:`rsilab.controller.model_use`)."""
        return model_use_check(self.store, candidate, result)

    def judge_safely(self, candidate_id: str) -> Candidate | None:
        """:meth:`judge` for background use: never raises. A candidate the controller could
        not evaluate (lab error, changed evaluation inputs) ends rejected with the reason;
        None when even that could not be recorded."""
        try:
            return self.judge(candidate_id)
        except EvaluationFault as exc:  # recorded pending by judge: a resume judges it again
            log.error("judging %s decided nothing: %s", candidate_id, exc)
            return self.store.get_as(candidate_id, Candidate)
        except Exception as exc:  # the caller is a pool thread: record, never lose it
            log.exception("judging %s failed", candidate_id)
            try:
                current = self.store.get_as(candidate_id, Candidate)
                if current.is_finished():
                    return current
                return self._finish(
                    current,
                    CandidateState.REJECTED,
                    f"the controller could not evaluate it: {exc}",
                    "the controller could not evaluate it; a person has to look at the lab",
                )
            except Exception:
                log.exception("recording the failure of %s failed", candidate_id)
                return None

    # --- guards ---------------------------------------------------------------------------

    def private_index(self) -> PrivateIndex:
        """The index of private items (built once, on first use)."""
        return self.guards.private_index()

    def _recipe(self, candidate: Candidate) -> Recipe:
        extra: dict[str, tuple[str, str]] = {}
        for data_id in candidate.data_ids:
            dataset = self.store.get_as(data_id, Dataset)
            if DataTier(dataset.tier).is_private:
                raise SystemInvalid(f"dataset {dataset.id} is private and cannot train anything")
            extra[dataset.name] = (dataset.artifact_sha256, dataset.artifact_kind)
        warm: list[str] | None = None
        if candidate.warm_start:
            parent = self.store.get_as(candidate.parent_version_id, SystemVersion)
            warm = [m for m in parent.model_sha256s if m]
            if not warm:
                raise SystemInvalid("warm start asked, but the parent version has no model")
        return Recipe(candidate.harness_sha256, extra, warm)

    # --- decision -------------------------------------------------------------------------

    def _version_recipe(self, version: SystemVersion) -> Recipe:
        """What ``version`` is rebuilt from to measure it on more seeds: its candidate's
        recipe, a rollback's original's, or the bare harness of a baseline."""
        while version.candidate_id is None and version.rollback_of is not None:
            version = self.store.get_as(version.rollback_of, SystemVersion)
        if version.candidate_id is None:
            return Recipe(version.harness_sha256)
        return self._recipe(self.store.get_as(version.candidate_id, Candidate))

    def _decide(self, candidate: Candidate, recipe: Recipe) -> Candidate:
        judged: Comparison | None = None
        for _ in range(_CAS_ATTEMPTS):
            lineage = require_lineage(self.store, self.task.name, self.lineage)
            head = self.store.get_as(lineage.head_id, SystemVersion)
            if judged is None or judged.head_id != head.id:
                # the head moved (or nothing is compared yet): pair with the current head
                candidate, judged = self._compare(candidate, recipe, head)
                if judged is None:
                    return candidate
            done = self._settle(candidate, judged, lineage, head)
            if done is not None:
                return done
        return self._finish(
            candidate,
            CandidateState.STALE,
            "the lineage's head kept moving; propose again from the new head",
        )

    def _settle(
        self, candidate: Candidate, judged: Comparison, lineage: Lineage, head: SystemVersion
    ) -> Candidate | None:
        """Record the verdict of ``judged``; None when the head moved before it was written."""
        decision, result = judged.decision, judged.result
        assert decision is not None
        stale_note = (
            f" (built from {candidate.parent_version_id}, judged against the current head "
            f"{head.id})"
            if head.id != candidate.parent_version_id
            else ""
        )
        update = {
            "decisions": decision.decisions,
            "alpha": decision.alpha,
            "compared_to": head.id,
            "reason": decision.reason + stale_note,
            "finished_at": utc_now(),
        }
        if not decision.accepted:
            done = candidate.model_copy(update={**update, "state": CandidateState.REJECTED})
            self._commit("candidate_rejected", done.summary(), done.campaign_id, [done])
            return done
        versions = lineage_versions(self.store, lineage)
        models = [m or "" for m in result.models]
        version = SystemVersion(
            task=self.task.name,
            lineage=self.lineage,
            label=next_label(versions, candidate.harness_sha256, models),
            harness_sha256=candidate.harness_sha256,
            model_sha256=models[0] or None,
            model_sha256s=models,
            seeds=result.seeds,
            parent_id=head.id,
            candidate_id=candidate.id,
            scores=_final_scores(
                [self.store.get_as(e, Evaluation) for e in candidate.evaluation_ids]
            ),
            evaluation_ids=list(candidate.evaluation_ids),
            decision=decision.reason + stale_note,
        )
        done = candidate.model_copy(
            update={**update, "state": CandidateState.ACCEPTED, "version_id": version.id}
        )
        moved = lineage.model_copy(
            update={"head_id": version.id, "versions": [*lineage.versions, version.id]}
        )
        try:
            self._commit(
                "candidate_accepted",
                f"{done.id} -> {version.label}",
                done.campaign_id,
                [done, version, moved],
            )
        except ConflictError:
            return None  # the head moved between reading and writing: judge again
        self._collect_if_over_limit()
        return done

    def _collect_if_over_limit(self) -> None:
        """Run gc when the lab's blob folder passed its size limit (rsilab.toml); a failure
        here never undoes the acceptance just recorded, so it is logged, not raised."""
        from rsilab.controller.gc import maybe_collect

        try:
            report = maybe_collect(self.lab)
        except Exception:
            log.exception("garbage collection after an acceptance failed")
            return
        if report is not None:
            log.info("gc freed %d bytes in %d blobs", report.freed_bytes, len(report.removed))

    # --- records --------------------------------------------------------------------------

    def _evaluations(
        self, subject: str, campaign_id: str | None, result: SystemEvaluation
    ) -> list[Evaluation]:
        out = []
        for (bench_name, tier), table in sorted(result.tables.items()):
            bench = self.task.benchmark(bench_name)
            samples = [
                SampleScore(sample_id=sid, epoch=i, seed=result.seeds[i], score=float(v))
                for i, row in enumerate(table.scores)
                for sid, v in zip(table.sample_ids, row, strict=True)
            ]
            aggregates = {f"avg@{len(result.seeds)}": avg_at_k(table.scores)}
            if np.isin(table.scores, (0.0, 1.0)).all():
                aggregates[f"pass@{len(result.seeds)}"] = pass_at_k(table.scores)
            out.append(
                Evaluation(
                    campaign_id=campaign_id,
                    benchmark=bench.name,
                    tier=tier,
                    subject_id=subject,
                    metric=bench.scorer,
                    samples=samples,
                    aggregates=aggregates,
                    evaluator=CONTROLLER_ACTOR,
                )
            )
        return out

    def _update(self, candidate: Candidate, **changes: object) -> Candidate:
        updated = candidate.model_copy(update=changes)
        self._commit("candidate_updated", updated.summary(), updated.campaign_id, [updated])
        return updated

    def _finish(
        self, candidate: Candidate, state: CandidateState, reason: str, public: str | None = None
    ) -> Candidate:
        """Decide ``candidate`` without a comparison. ``public`` (default: ``reason``) is what
        an agent may read; pass it whenever ``reason`` may quote private logs."""
        note = public if public is not None else reason
        done = candidate.model_copy(
            update={
                "state": state,
                "reason": reason,
                "public_note": note,
                "finished_at": utc_now(),
            }
        )
        self._commit(f"candidate_{state.value}", done.summary(), done.campaign_id, [done])
        return done

    def _flag(self, stage: FlagStage, rule: str, detail: str, candidate: Candidate | None) -> None:
        flag = ProtocolFlag(
            campaign_id=candidate.campaign_id if candidate else None,
            stage=stage,
            rule=rule,
            detail=detail if candidate is None else f"candidate {candidate.id}: {detail}",
            actor=candidate.proposer if candidate else CONTROLLER_ACTOR,
            role=str(Role.WORKER) if candidate else str(Role.CONTROLLER),
            blocked=True,
        )
        self._commit("protocol_flag", rule, flag.campaign_id, [flag])

    def _commit(
        self, action: str, detail: str, campaign_id: str | None, writes: Sequence[Record]
    ) -> None:
        draft = EventDraft(
            actor=CONTROLLER_ACTOR,
            role=str(Role.CONTROLLER),
            action=action,
            campaign_id=campaign_id,
            detail=detail[:500],
        )
        self.store.commit(draft, list(writes))


def _final_scores(evaluations: Sequence[Evaluation]) -> dict[str, Interval]:
    out = {}
    for evaluation in evaluations:
        if evaluation.tier == DataTier.FINAL:
            key = next(k for k in evaluation.aggregates if k.startswith("avg@"))
            out[evaluation.benchmark] = evaluation.aggregates[key]
    return out
