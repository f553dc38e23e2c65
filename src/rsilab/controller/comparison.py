"""Paired, sequential comparison of a candidate with the lineage's head, seed by seed.

Seeds: proposal ``j`` against head ``H`` trains on :func:`comparison_seeds`, derived from the
lab secret, the head (its task, lineage and harness tree, which two labs started from the same
task share) and ``j``. So a re-judged candidate gets the same seeds, two policies run with the
same lab secret get common random numbers, and seeds an agent may learn after one verdict say
nothing about the next proposal's. Seed index ``s`` is trained for the candidate *and* for the
head (:class:`HeadReference`), and the rule (:mod:`rsilab.controller.acceptance`) pairs them.

The head keeps every seed it was measured on (``SystemVersion.reference_evaluation_ids``) and is
measured only on seeds it lacks. A newly accepted head never serves as the reference with the
scores that got it accepted (they carry a winner's curse: it won on those seeds): the next
proposal's seeds are fresh, so it is re-measured on them first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from rsilab.controller.acceptance import Decision, decide
from rsilab.controller.evaluation import (
    Recipe,
    ScoreTable,
    SystemEvaluation,
    SystemEvaluator,
    controller_seeds,
)
from rsilab.controller.jobs import CONTROLLER_ACTOR
from rsilab.errors import ConflictError
from rsilab.records import (
    Candidate,
    DataTier,
    Evaluation,
    EventDraft,
    FlagStage,
    Resources,
    Role,
    SampleScore,
    SystemVersion,
)
from rsilab.store.base import Store
from rsilab.tasks import Task

__all__ = ["Comparison", "HeadReference", "compare", "comparison_seeds", "merge"]

_Key = tuple[str, DataTier]
_WRITE_ATTEMPTS = 5


def comparison_seeds(
    secret: bytes, head: SystemVersion, proposal_index: int, count: int
) -> list[int]:
    """The controller seeds of proposal ``proposal_index`` against ``head``, in look order."""
    subject = f"compare/{head.task}/{head.lineage}/{head.harness_sha256}/{proposal_index}"
    return controller_seeds(secret, subject, count)


def merge(results: Sequence[SystemEvaluation]) -> SystemEvaluation:
    """One evaluation holding every seed of ``results`` (rows appended in order)."""
    first = results[0]
    tables = {
        key: ScoreTable(
            table.sample_ids,
            np.vstack([r.tables[key].scores for r in results]),
            sum(r.tables[key].invalid for r in results),
        )
        for key, table in first.tables.items()
    }
    return SystemEvaluation(
        seeds=[s for r in results for s in r.seeds],
        models=[m for r in results for m in r.models],
        tables=tables,
        job_ids=[j for r in results for j in r.job_ids],
        resources=Resources(
            cpu_s=sum(r.resources.cpu_s for r in results),
            wall_s=sum(r.resources.wall_s for r in results),
            peak_rss_mb=max(r.resources.peak_rss_mb for r in results),
        ),
        model_ignored=first.model_ignored,
        predictions=[p for r in results for p in r.predictions],
    )


class HeadReference:
    """The head's accept-tier scores by seed: stored ones reused, missing ones measured and
    stored with the version (a compare-and-swap on it; concurrent judges each add theirs)."""

    def __init__(
        self,
        task: Task,
        store: Store,
        evaluator: SystemEvaluator,
        recipe_of: Callable[[SystemVersion], Recipe],
    ) -> None:
        self.task = task
        self.store = store
        self.evaluator = evaluator
        self.recipe_of = recipe_of

    def stored(self, version: SystemVersion) -> dict[_Key, dict[int, dict[str, float]]]:
        """``(benchmark, accept)`` -> seed -> sample id -> score, of every reference run."""
        out: dict[_Key, dict[int, dict[str, float]]] = {}
        for eval_id in version.reference_evaluation_ids:
            evaluation = self.store.get_as(eval_id, Evaluation)
            rows = out.setdefault((evaluation.benchmark, DataTier.ACCEPT), {})
            for sample in evaluation.samples:
                if sample.seed is not None:
                    rows.setdefault(sample.seed, {})[sample.sample_id] = sample.score
        return out

    def matrices(
        self,
        version: SystemVersion,
        seeds: Sequence[int],
        sample_ids: dict[_Key, list[str]],
        *,
        candidate: Candidate,
    ) -> dict[_Key, np.ndarray]:
        """``scores[seed][sample]`` of the head on ``seeds`` (measuring the seeds it lacks),
        columns in ``sample_ids`` order, per accept-tier key.

        Raises:
            SystemInvalid: the head could not be re-trained on a seed (a change since it was
                accepted, such as a deleted dataset, is the candidate's problem: it cannot be
                compared).
        """
        # read afresh: earlier looks (and other judges) stored seeds since ``version`` was read
        have = self.stored(self.store.get_as(version.id, SystemVersion))
        missing = [s for s in seeds if any(s not in have.get(k, {}) for k in sample_ids)]
        if missing:
            result = self.evaluator.evaluate(
                self.recipe_of(version),
                missing,
                campaign_id=candidate.campaign_id,
                candidate_id=candidate.id,
            )
            self._store(version.id, result, candidate.campaign_id)
            for key in sample_ids:
                table = result.tables[key]
                rows = have.setdefault(key, {})
                for seed, row in zip(result.seeds, table.scores, strict=True):
                    rows[seed] = dict(zip(table.sample_ids, map(float, row), strict=True))
        return {
            key: np.array([[have[key][s][i] for i in ids] for s in seeds], float)
            for key, ids in sample_ids.items()
        }

    def _store(self, version_id: str, result: SystemEvaluation, campaign_id: str | None) -> None:
        evaluations = [
            Evaluation(
                campaign_id=campaign_id,
                benchmark=name,
                tier=tier,
                subject_id=version_id,
                metric=self.task.benchmark(name).scorer,
                samples=[
                    SampleScore(sample_id=sid, epoch=i, seed=result.seeds[i], score=float(v))
                    for i, row in enumerate(table.scores)
                    for sid, v in zip(table.sample_ids, row, strict=True)
                ],
                evaluator=CONTROLLER_ACTOR,
            )
            for (name, tier), table in sorted(result.tables.items())
            if tier is DataTier.ACCEPT
        ]
        for _ in range(_WRITE_ATTEMPTS):
            version = self.store.get_as(version_id, SystemVersion)
            ids = [*version.reference_evaluation_ids, *(e.id for e in evaluations)]
            updated = version.model_copy(update={"reference_evaluation_ids": ids})
            draft = EventDraft(
                actor=CONTROLLER_ACTOR,
                role=str(Role.CONTROLLER),
                action="head_measured",
                campaign_id=campaign_id,
                detail=f"{version_id} on {len(result.seeds)} more seed(s)",
            )
            try:
                self.store.commit(draft, [*evaluations, updated])
                return
            except ConflictError:
                continue  # another judge added its own seeds meanwhile: add ours to theirs
        raise ConflictError(f"{version_id}: could not record its reference measurements")


@dataclass(frozen=True)
class Comparison:
    """What comparing a candidate with one head produced."""

    head_id: str
    result: SystemEvaluation
    """The candidate's evaluation on every seed it was trained on (all looks)."""
    decision: Decision | None
    """The rule's final decision; None when a model-use check stopped it first."""
    detected: tuple[FlagStage, str, str, str] | None = None
    """The model-use finding (stage, rule, detail, public note) that stopped it, if any."""


def compare(
    candidate: Candidate,
    recipe: Recipe,
    head: SystemVersion,
    *,
    seeds: Sequence[int],
    looks: tuple[int, ...],
    alpha: float,
    evaluator: SystemEvaluator,
    reference: HeadReference,
    model_use: Callable[[SystemEvaluation], tuple[FlagStage, str, str, str] | None],
) -> Comparison:
    """Train ``candidate`` and ``head`` look by look on ``seeds`` (as many as ``looks[-1]``)
    and apply the rule at each look until it is final (see the module docstring).

    ``model_use`` runs on the candidate's evaluation so far after each look; a finding stops.

    Raises:
        SystemInvalid: the candidate or the head could not be trained or scored.
    """
    batches: list[SystemEvaluation] = []
    passed: frozenset[str] = frozenset()
    done = 0
    decision: Decision | None = None
    for m in looks:
        new = list(seeds[done:m])
        ids = {
            (b.name, DataTier.ACCEPT): [
                s.id for s in evaluator.private_samples(b.name, DataTier.ACCEPT)
            ]
            for b in reference.task.benchmarks
        }
        # candidate and head train side by side: the executor's slots bound the work
        with ThreadPoolExecutor(max_workers=2) as pool:
            mine = pool.submit(
                evaluator.evaluate,
                recipe,
                new,
                campaign_id=candidate.campaign_id,
                candidate_id=candidate.id,
                probe_model=not batches and any(head.model_sha256s),
            )
            theirs = pool.submit(
                reference.matrices, head, list(seeds[:m]), ids, candidate=candidate
            )
            batch, heads = mine.result(), theirs.result()
        batches.append(batch)
        done = m
        result = merge(batches)
        found = model_use(result)
        if found is not None:
            return Comparison(head.id, result, None, found)
        scores = {k: t.scores for k, t in result.tables.items() if k[1] is DataTier.ACCEPT}
        decision = decide(
            reference.task, scores, heads, proposal_index=candidate.proposal_index,
            alpha=alpha, looks=looks, passed_before=passed,
        )  # fmt: skip
        passed = decision.passed
        if decision.final:
            break
    return Comparison(head.id, merge(batches), decision)
