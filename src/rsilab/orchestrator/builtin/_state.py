"""What the campaign runner knows, rebuilt from the records before every step.

The runner keeps no state of its own between steps: experiments done are the done intents
keyed ``exp:<n>`` (their results hold the experiment id, direction, config and dev target
score), experiments begun and not done are the pending ones (in flight, or interrupted by a
crash and to be run again as a new attempt), the current reference (what the lineage head
scores on dev) is the result of the last accepted proposal (else of the campaign's first
experiment, which runs the head's config), and which knobs a direction may change is written
in its plan (``knobs: a, b``). So a resumed campaign sees exactly what the stopped one had done.

Direction: the records hold scores as measured, in the target's own units. The view turns them
so that higher is better (:func:`rsilab.stats.oriented`: negated for a lower-is-better target)
as it loads them, so every comparison the policy makes (best runs, gains, rewards, verdicts)
is right for either direction; :meth:`CampaignView.raw` turns an oriented score back for a
record or a message.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import JsonValue

from rsilab.orchestrator.builtin.main._rules import DirectionStats, gain_reward
from rsilab.orchestrator.research.dag import ResearchDag
from rsilab.records import (
    DataTier,
    Direction,
    EdgeRelation,
    Evaluation,
    Intent,
    IntentState,
    Review,
    Verdict,
)
from rsilab.stats import oriented
from rsilab.store import Store

EXP_PREFIX = "exp:"
CONCLUDE_PREFIX = "conclude:"
_KNOBS = re.compile(r"^knobs: (.*)$", re.MULTILINE)
_FROM = re.compile(r"^from: (\S+)$", re.MULTILINE)


def knobs_plan(knobs: list[str], text: str) -> str:
    """A direction plan that names the knobs its workers may change (read by :func:`knobs_of`)."""
    return f"{text}\nknobs: {', '.join(knobs)}"


def base_plan(experiment_id: str, text: str) -> str:
    """A direction plan that names the experiment whose config its workers start from (read by
    :func:`base_of`): the knobs its plan does not open stay at that config's values."""
    return f"{text}\nfrom: {experiment_id}"


def base_of(direction: Direction) -> str | None:
    """The experiment a direction's plan starts from; None: the reference."""
    match = _FROM.search(direction.plan)
    return match.group(1).strip() if match else None


def knobs_of(direction: Direction) -> list[str]:
    """The knobs a direction's plan allows (empty when it names none)."""
    match = _KNOBS.search(direction.plan)
    return [k.strip() for k in match.group(1).split(",") if k.strip()] if match else []


@dataclass(frozen=True)
class Run:
    """One finished experiment as the runner recorded it."""

    index: int
    experiment_id: str
    direction_id: str
    config: dict[str, JsonValue]
    score: float
    """The policy's score, higher always better: the dev target score oriented by the
    target's direction (negated when lower is better), less :data:`NON_TARGET_PENALTY` per
    unit by which a non-target benchmark falls more than :data:`NON_TARGET_MARGIN` of its
    tolerance short of the reference's (as :meth:`CampaignView.load` weighs it)."""
    failed: bool = False
    """The experiment failed (it has no dev evaluation; its score, 0.0, means nothing: a failed
    run is never a best and earns the lowest reward)."""
    scores: dict[str, float] = field(default_factory=dict)
    """Dev score per benchmark, as measured (empty for runs recorded before it was kept)."""
    shortfall: float = 0.0
    """How far, in score units summed over the non-targets, this run falls beyond
    :data:`NON_TARGET_MARGIN` of their tolerances short of the reference (0.0: feasible)."""
    seed: int | None = None
    """The seed its jobs ran on (None for runs recorded before seeds were): runs of two configs
    on one seed are a pair (:mod:`~rsilab.orchestrator.builtin._seeds`)."""

    @property
    def target(self) -> float:
        """The oriented dev target score before the non-target penalty (0.0 when failed)."""
        return self.score + NON_TARGET_PENALTY * self.shortfall


@dataclass(frozen=True)
class NonTarget:
    """A benchmark the campaign must not regress beyond ``tolerance`` (the controller's
    non-inferiority test on the private tiers, anticipated on dev)."""

    name: str
    tolerance: float
    higher_is_better: bool = True


NON_TARGET_PENALTY = 10.0
"""Target-score units lost per unit of a non-target's shortfall beyond its margin: the
controller rejects such a candidate, so the policy steers well away from it."""
NON_TARGET_MARGIN = 0.5
"""Share of a non-target's tolerance the policy allows itself on dev: one dev run is noisy and
the controller tests non-inferiority on a lower bound (both tuned on synthetic)."""


@dataclass
class CampaignView:
    """The campaign as the built-in policy sees it (see the module docstring)."""

    dag: ResearchDag
    runs: list[Run]
    ref_ids: list[str]
    ref_score: float | None
    concluded: dict[str, dict[str, Any]] = field(default_factory=dict)
    pending: list[Intent] = field(default_factory=list)
    """``exp:<n>`` intents begun and not done, lowest ``n`` first."""
    last_index: int = 0
    """The highest ``n`` of any ``exp:<n>`` intent (done, pending or abandoned)."""
    higher_is_better: bool = True
    """The target's direction; the view's scores are oriented by it (see the module
    docstring)."""
    non_targets: tuple[NonTarget, ...] = ()
    """The benchmarks the runs' scores were weighed against (see :attr:`Run.score`)."""

    @classmethod
    def load(
        cls,
        store: Store,
        campaign_id: str,
        non_targets: Sequence[NonTarget] = (),
        higher_is_better: bool = True,
    ) -> CampaignView:
        """Read the DAG and the intents of ``campaign_id``; each run's target score is
        oriented by ``higher_is_better`` (the target's direction) and weighed against
        ``non_targets`` (see :attr:`Run.score`)."""
        dag = ResearchDag.load(store, campaign_id)
        intents = store.query_as(Intent, campaign_id=campaign_id)
        done = [i for i in intents if i.state is IntentState.DONE]
        exps = [i for i in intents if i.key.startswith(EXP_PREFIX)]
        runs = sorted(
            (_run(i, higher_is_better) for i in done if i.key.startswith(EXP_PREFIX) and i.result),
            key=lambda r: r.index,
        )
        pending = sorted((i for i in exps if i.state is IntentState.PENDING), key=exp_index)
        concluded = {
            i.key.removeprefix(CONCLUDE_PREFIX): dict(i.result or {})
            for i in sorted(done, key=lambda i: i.created_at)
            if i.key.startswith(CONCLUDE_PREFIX)
        }
        ref_ids = [runs[0].experiment_id] if runs else []
        ref_score = runs[0].score if runs else None
        for result in concluded.values():
            if result.get("accepted"):
                ref_ids = list(result["ref_ids"])
                ref_score = oriented(float(result["ref_score"]), higher_is_better)
        runs = _weighed(runs, ref_ids, non_targets)
        last = max((exp_index(i) for i in exps), default=0)
        return cls(
            dag,
            runs,
            ref_ids,
            ref_score,
            concluded,
            pending,
            last,
            higher_is_better,
            tuple(non_targets),
        )

    def raw(self, score: float) -> float:
        """An oriented score of this view in the target's own units (as the records hold it)."""
        return oriented(score, self.higher_is_better)

    def settled(self, in_flight: Collection[int]) -> int:
        """Runs whose work has ended: those recorded, less the experiments ``in_flight``
        (their ``n``). A run is recorded a moment before its thread returns; progress counts
        it as running until then, so done plus running never exceeds what exists."""
        return sum(1 for r in self.runs if r.index not in in_flight)

    def runs_in(self, direction_id: str) -> list[Run]:
        """The direction's finished experiments, oldest first."""
        return [r for r in self.runs if r.direction_id == direction_id]

    def search_runs(self, direction_id: str) -> list[Run]:
        """The direction's experiments a review can read: not the reference, not failed."""
        return [
            r
            for r in self.runs_in(direction_id)
            if r.experiment_id not in self.ref_ids and not r.failed
        ]

    def ref_config(self) -> dict[str, JsonValue]:
        """The config of the reference (the head's, as the campaign ran it); {} before any."""
        for run in self.runs:
            if run.experiment_id in self.ref_ids[:1]:
                return dict(run.config)
        return {}

    def latest_review(self, direction_id: str) -> Review | None:
        """The newest review naming the direction (or reading only its experiments)."""
        reviews = self.dag.reviews.get(direction_id, [])
        return max(reviews, key=lambda r: r.created_at) if reviews else None

    def experiment_since(self, direction_id: str, stamp: str) -> bool:
        """True when an experiment was created in the direction after ``stamp``."""
        return any(e.created_at > stamp for e in self.dag.experiments.get(direction_id, []))

    def child_with(self, direction_id: str, relation: str) -> Direction | None:
        """The direction's first child grown with ``relation``, if any."""
        for edge in self.dag.edges:
            if edge.parent_id == direction_id and str(edge.relation) == relation:
                return self.dag.directions[edge.child_id]
        return None

    def on_hold(self, direction: Direction) -> bool:
        """True while the direction's verify child is still open: it waits for its verdict."""
        child = self.verify_child(direction.id)
        return child is not None and not child.state.is_finished()

    def verify_child(self, direction_id: str) -> Direction | None:
        """The direction's verify child, if it has one."""
        for edge in self.dag.edges:
            if edge.parent_id == direction_id and edge.relation == EdgeRelation.VERIFY:
                return self.dag.directions[edge.child_id]
        return None

    def is_verify(self, direction: Direction) -> bool:
        """True for a direction made to re-run another's best config."""
        return any(e.relation == EdgeRelation.VERIFY for e in direction.parents)

    def best(self, direction_id: str) -> Run | None:
        """The direction's best experiment by dev target score (the earliest of ties)."""
        runs = [r for r in self.runs_in(direction_id) if not r.failed]
        return max(runs, key=lambda r: (r.score, -r.index)) if runs else None

    def stats(self, direction_id: str, noise_floor: float) -> DirectionStats:
        """The direction's :class:`DirectionStats` against the current reference score."""
        ref = self.ref_score if self.ref_score is not None else 0.0
        scale = max(2.0 * noise_floor, 1e-6)
        runs = [r for r in self.runs_in(direction_id) if r.experiment_id not in self.ref_ids]
        best, last = ref, 0
        for ordinal, run in enumerate(runs, start=1):
            if not run.failed and run.score > best:
                best, last = run.score, ordinal
        refuted = any(r.verdict == Verdict.REFUTES for r in self.dag.reviews.get(direction_id, []))
        return DirectionStats(
            direction_id=direction_id,
            rewards=[0.0 if r.failed else gain_reward(r.score - ref, scale) for r in runs],
            last_improvement_at=last,
            experiments=len(runs),
            best_gain=best - ref,
            verified=self.verify_child(direction_id) is not None,
            refuted=refuted,
        )


def mean_scores(runs: Sequence[Run]) -> dict[str, float]:
    """Per benchmark, the mean dev score over the ``runs`` that have one."""
    values: dict[str, list[float]] = {}
    for run in runs:
        for name, value in run.scores.items():
            values.setdefault(name, []).append(value)
    return {name: sum(v) / len(v) for name, v in values.items()}


def shortfall_of(
    scores: Mapping[str, float], reference: Mapping[str, float], non_targets: Sequence[NonTarget]
) -> float:
    """How far ``scores`` fall short of ``reference`` (per-benchmark dev scores), beyond
    :data:`NON_TARGET_MARGIN` of each non-target's tolerance, in score units summed over the
    non-targets (0.0: feasible); a benchmark either side lacks counts nothing. The one
    reading of a non-target regression for the policy: one run against the reference's mean
    (:meth:`CampaignView.load`), or a config's mean over its runs (the race)."""
    total = 0.0
    for b in non_targets:
        if b.name not in scores or b.name not in reference:
            continue
        allowed = NON_TARGET_MARGIN * b.tolerance
        floor, value = reference[b.name] - allowed, scores[b.name]
        if not b.higher_is_better:
            floor, value = -(reference[b.name] + allowed), -value
        total += max(0.0, floor - value)
    return total


def _weighed(runs: list[Run], ref_ids: list[str], non_targets: Sequence[NonTarget]) -> list[Run]:
    """``runs`` with each score lowered for non-target shortfalls beyond tolerance against
    the mean of the reference runs' scores (runs without scores are left as they are)."""
    reference = mean_scores([r for r in runs if r.experiment_id in ref_ids])
    out = []
    for run in runs:
        penalty = 0.0 if run.failed else shortfall_of(run.scores, reference, non_targets)
        weighed = replace(run, score=run.score - NON_TARGET_PENALTY * penalty, shortfall=penalty)
        out.append(weighed if penalty else run)
    return out


def exp_index(intent: Intent) -> int:
    """The ``n`` of an ``exp:<n>`` intent."""
    return int(intent.key.removeprefix(EXP_PREFIX))


def _run(intent: Intent, higher_is_better: bool) -> Run:
    result = intent.result or {}
    failed = bool(result.get("failed", False))
    score = float(result["score"])
    return Run(
        exp_index(intent),
        str(result["experiment_id"]),
        str(result["direction_id"]),
        dict(result["config"]),
        score if failed else oriented(score, higher_is_better),
        failed,
        {str(k): float(v) for k, v in dict(result.get("scores") or {}).items()},
        seed=int(result["seed"]) if result.get("seed") is not None else None,
    )


def dev_matrix(
    store: Store, experiment_ids: list[str], benchmark: str, tier: DataTier = DataTier.DEV
) -> list[list[float]]:
    """Per-sample scores of ``benchmark`` on ``tier`` (dev, or train for fold evaluations):
    one row per such evaluation of the experiments, columns the samples every row scored, in
    sample-id order."""
    rows: list[dict[str, float]] = []
    for experiment_id in experiment_ids:
        for evaluation in store.query_as(Evaluation, fields={"subject_id": experiment_id}):
            if evaluation.tier == tier and evaluation.benchmark == benchmark:
                rows.append({s.sample_id: s.score for s in evaluation.samples})
    if not rows:
        return []
    shared = sorted(set.intersection(*(set(r) for r in rows)))
    return [[row[i] for i in shared] for row in rows]
