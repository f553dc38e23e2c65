"""The built-in Reviewer: compares a direction's evidence with the reference and files a Review.

A search direction is reviewed after every :data:`REVIEW_EVERY` of its experiments (its best one
against the reference, the runs that stand for the lineage head); a verification is reviewed once
its fresh-seed re-runs are done (all of them against the reference). The verdict and recommendation
come from :func:`~rsilab.orchestrator.builtin.reviewer._rules.review_pair`; the Main policy reads
them from the Review record and acts on them (see :mod:`rsilab.orchestrator.builtin.main._agent`).
Every review names the direction it is about, so it is that direction's review in the DAG and in the
lock-in measures.

Each rationale ends with what Main's own rule would do without the review
(:data:`DEFAULT_RULE_NOTE`: :func:`~rsilab.orchestrator.builtin.main._rules.next_move` with
verification, or for a verification :func:`default_verdict`), so the lock-in measures can count the
reviews that changed the next action, not only those that were followed.

Direction: the per-sample scores are oriented by the target's direction before they are compared
(negated when lower is better), so a gain is always positive and "better" means better.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

from rsilab.orchestrator.builtin._context import RunContext, direction_share
from rsilab.orchestrator.builtin._seeds import shared_seeds
from rsilab.orchestrator.builtin._state import CampaignView, Run, dev_matrix
from rsilab.orchestrator.builtin.main._race import Contender
from rsilab.orchestrator.builtin.main._race import groups as config_groups
from rsilab.orchestrator.builtin.main._rules import DirectionStats, next_move
from rsilab.orchestrator.builtin.reviewer._predict import MIN_RUNS, Prediction, predict_acceptance
from rsilab.orchestrator.builtin.reviewer._rules import (
    ReviewFinding,
    clearly_better,
    review_pair,
)
from rsilab.orchestrator.research.measures import DEFAULT_RULE_NOTE
from rsilab.records import DataTier, Direction, Recommendation, Verdict
from rsilab.stats import noise_floor_from, oriented

REVIEW_EVERY = 3
"""The Reviewer looks at a search direction after every this many of its experiments."""
PLATEAU = 2 * REVIEW_EVERY
"""Experiments without a new best after which a review advises a branch."""
DEFAULT_NOISE_FLOOR = 0.02
"""Noise floor (dev score units) until verification runs measure one."""


def prediction_seed(campaign_seed: int, proposal_index: int) -> int:
    """The RNG seed of the acceptance prediction for ``proposal_index`` of a campaign run with
    ``campaign_seed``: the same campaign predicts the same way on resume, and two campaigns
    with one seed (their searches alike) predict alike."""
    digest = hashlib.sha256(f"predict:{campaign_seed}:{proposal_index}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def search_advice(finding: ReviewFinding, stats: DirectionStats) -> Recommendation:
    """The move a review of a search direction advises, from the paired comparison of its best
    run with the reference: ``revise`` when it refutes the direction (its best is clearly
    worse); ``branch`` when the direction has run :data:`PLATEAU` experiments since its last
    new best (a plateau, found sooner than Main's patience: the sampler has settled there, so
    the next direction opens other knobs from the best config found anywhere); else
    ``continue``. A gain is never verified mid-run (the race at the end re-runs the best
    configs), so ``verify`` becomes ``continue``."""
    if finding.recommendation == Recommendation.REVISE:
        return Recommendation.REVISE
    if stats.experiments - stats.last_improvement_at >= PLATEAU:
        return Recommendation.BRANCH
    return Recommendation.CONTINUE


def default_verdict(mean: float, ref_score: float | None) -> str:
    """Main's own verdict on a verification, without a review: ``continue`` (propose) when
    the re-runs' mean dev score beats the reference, else ``stop``."""
    return "continue" if ref_score is not None and mean > ref_score else "stop"


def review_due(view: CampaignView, direction: Direction) -> bool:
    """True when a search direction has run :data:`REVIEW_EVERY` reviewable experiments
    since its last review (counted as reviews so far, one per ``REVIEW_EVERY``)."""
    done = len(view.search_runs(direction.id))
    return done >= REVIEW_EVERY * (len(view.dag.reviews.get(direction.id, [])) + 1)


class Reviewer:
    """Files reviews through the Reviewer role's tools."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def noise_floor(self, view: CampaignView) -> float:
        """Pooled seed spread of the configs run more than once (the race's and the
        verifications' re-runs); the default until one has."""
        groups = []
        for group in config_groups(view.runs):
            if len(group.runs) >= 2:
                ids = [r.experiment_id for r in group.runs]
                groups.append(dev_matrix(self.ctx.store, ids, self.ctx.target, self.ctx.tier))
        try:
            return noise_floor_from([g for g in groups if len(g) >= 2])
        except ValueError:
            return DEFAULT_NOISE_FLOOR

    def gain_is_clear(self, view: CampaignView, run: Run, noise_floor: float) -> bool:
        """True when ``run``'s dev target gain over the reference stands clear of noise as a
        review reads it (:func:`clearly_better` on their per-sample dev scores), or when there
        is no reference run to compare with.

        The dev set's own sampling noise is what the noise floor misses before any config has
        been re-run (it measures seed spread only, from re-runs): a few items' worth of gain on
        a small dev set is within it and would not hold on the private tiers."""
        failed = {r.experiment_id for r in view.runs if r.failed}
        ref = [i for i in view.ref_ids if i not in failed]
        if not ref or run.failed:
            return True
        target, tier = self.ctx.target, self.ctx.tier
        higher = self.ctx.target_benchmark.higher_is_better
        a = _oriented(dev_matrix(self.ctx.store, [run.experiment_id], target, tier), higher)
        b = _oriented(dev_matrix(self.ctx.store, ref, target, tier), higher)
        return clearly_better(a, b, noise_floor=noise_floor)

    def predict(
        self,
        view: CampaignView,
        direction: Direction,
        winner: Contender,
        proposal_index: int,
        *,
        last_floor: float | None = None,
    ) -> Prediction:
        """File the Reviewer's prediction of the controller's verdict on ``winner`` (its runs
        against the reference's, :func:`predict_acceptance`: paired by seed where at least
        :data:`~rsilab.orchestrator.builtin.reviewer._predict.MIN_RUNS` seeds are shared) as a
        review of ``direction``:
        ``continue`` (propose it) when the estimated probability that the controller's
        sequential test accepts is at least
        :data:`~rsilab.orchestrator.builtin.reviewer._predict.PROPOSE_AT`, else ``stop`` (hold
        it: a proposal the controller would likely reject spends alpha for nothing). For the
        campaign's last proposal (``last_floor`` given), a probability of at least
        ``last_floor`` is also ``continue``, and the rationale says why: holding the last
        proposal saves no alpha for a later one, so the review never advises holding what the
        campaign then proposes. The simulation's RNG is seeded from the campaign and the
        proposal index (:func:`prediction_seed`)."""
        ref = view.ref_config()
        ref_runs = [r for r in view.runs if not r.failed and r.config == ref]
        refs = [r.experiment_id for r in ref_runs]
        ids = [r.experiment_id for r in winner.runs]
        pairs = shared_seeds(winner.runs, ref_runs)
        if len(pairs) >= MIN_RUNS:  # paired by seed: what the two configs differ by alone
            compared = [a.experiment_id for a, _ in pairs], [b.experiment_id for _, b in pairs]
        else:  # runs recorded without shared seeds: the two arms as independent
            compared = ids, refs
        prediction = predict_acceptance(
            self.ctx.store,
            self.ctx.task,
            *compared,
            proposal_index=proposal_index,
            tier=self.ctx.tier,
            seed=prediction_seed(self.ctx.seed, proposal_index),
            paired=len(pairs) >= MIN_RUNS,
        )
        # Main's own rule without reviews: propose the race's winner, a positive paired gain
        default = default_verdict(winner.gain, 0.0)
        failing = [b for b, ok in prediction.passed.items() if not ok]
        rejects = (
            "the controller's sequential test likely rejects it "
            f"({', '.join(failing) or 'their conjunction'} fails)"
        )
        if prediction.accepted:
            verdict, advice = Verdict.SUPPORTS, Recommendation.CONTINUE
            said = "the controller's sequential test likely accepts it: propose it"
        elif (
            last_floor is not None
            and prediction.probability is not None
            and prediction.probability >= last_floor
        ):
            verdict, advice = Verdict.INCONCLUSIVE, Recommendation.CONTINUE
            said = (
                f"{rejects}, but not so likely that the campaign's last proposal should be "
                "held (holding it saves no alpha for a later one): worth proposing if its "
                "expected gain is the largest of the race's contenders"
            )
        else:
            verdict, advice = Verdict.INCONCLUSIVE, Recommendation.STOP
            said = (
                f"{rejects}: hold the proposal"
                if prediction.probability is not None
                else f"nothing to judge ({prediction.reason}): hold the proposal"
            )
        where = "Dev" if self.ctx.tier is DataTier.DEV else "Out-of-fold train"
        rationale = (
            f"{where} {self.ctx.target}: prediction of the controller's verdict on {ids[-1]} "
            f"for the reference {refs[0]}; at the next proposal's alpha, {said}. "
            + DEFAULT_RULE_NOTE.format(default)
        )  # no number the records do not hold: the probability goes in the intent's result
        self.ctx.door.reviewer(
            "submit_review",
            experiment_ids=ids,
            baseline_ids=refs,
            direction_id=direction.id,
            verdict=str(verdict),
            recommendation=str(advice),
            rationale=rationale,
        )
        self.ctx.say("review", f"prediction for {ids[-1]}: {advice} ({prediction.reason})")
        return prediction

    def review(
        self,
        view: CampaignView,
        direction: Direction,
        treatment: list[Run] | None = None,
        *,
        verified: bool = False,
    ) -> Recommendation | None:
        """File a review of ``direction``: its best search run (or ``treatment``, the re-runs
        of a verification, with ``verified``) against the reference. The recommendation, or
        None when there is nothing to compare."""
        if treatment is None:
            runs = view.search_runs(direction.id)
            best = max(runs, key=lambda r: (r.score, -r.index)) if runs else None
            treatment = [best] if best is not None else []
        failed = {r.experiment_id for r in view.runs if r.failed}
        ids = [r.experiment_id for r in treatment if not r.failed]
        ref = [i for i in view.ref_ids if i not in failed]  # a failed run has no dev scores
        target = self.ctx.target
        if not ids or not ref or set(ids) & set(ref):
            return None
        tier = self.ctx.tier
        compared = self.ctx.door.reviewer(
            "compare_eval_samples",
            experiment_a=ids[0],
            experiment_b=ref[0],
            benchmark=target,
            tier=str(tier),
        )["benchmarks"][0]
        higher = self.ctx.target_benchmark.higher_is_better
        a = _oriented(dev_matrix(self.ctx.store, ids, target, tier), higher)
        b = _oriented(dev_matrix(self.ctx.store, ref, target, tier), higher)
        floor = self.noise_floor(view)
        finding = review_pair(a, b, noise_floor=floor, verified=verified)
        better, worse = (
            (compared["a_higher"], compared["b_higher"])
            if higher
            else (compared["b_higher"], compared["a_higher"])
        )
        if verified:
            default = default_verdict(
                sum(r.score for r in treatment) / len(treatment), view.ref_score
            )
        else:
            share = direction_share(self.ctx.budget)
            stats = view.stats(direction.id, floor)
            default = next_move(stats, noise_floor=floor, budget=share, verify=False)
            finding = replace(finding, recommendation=search_advice(finding, stats))
        rationale = (
            f"{'Dev' if tier is DataTier.DEV else 'Out-of-fold train'} {target}: "
            f"{compared['mean_a']:.4f} for {ids[0]} against "
            f"{compared['mean_b']:.4f} for the reference {ref[0]}; {better} "
            f"samples better, {worse} worse. "
            + ("Within noise; " if finding.within_noise else "")
            + f"verdict {finding.verdict}, advice {finding.recommendation}. "
            + DEFAULT_RULE_NOTE.format(default)
        )  # no number the records do not hold: the review tool flags those
        self.ctx.door.reviewer(
            "submit_review",
            experiment_ids=ids,
            baseline_ids=ref,
            direction_id=direction.id,
            verdict=str(finding.verdict),
            recommendation=str(finding.recommendation),
            rationale=rationale,
        )
        self.ctx.say(
            "review",
            f"review of {direction.title!r}: {finding.verdict}, advice {finding.recommendation}",
        )
        return finding.recommendation


def _oriented(matrix: list[list[float]], higher_is_better: bool) -> list[list[float]]:
    """``matrix`` with every score oriented so that higher is better."""
    return [[oriented(x, higher_is_better) for x in row] for row in matrix]
