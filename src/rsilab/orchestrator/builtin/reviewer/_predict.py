"""The Reviewer's prediction of the controller's verdict: the power of its test on the dev evidence.

The policy proposes once, and only a config the controller would likely accept. Applying the
controller's rule to two or three dev runs as one look is far stricter than the controller,
which trains up to 24 paired seeds in looks (:mod:`rsilab.controller.sequential`): with two
reference runs the rule's quantile has one degree of freedom and nothing is ever proposed. So
the Reviewer predicts from power instead:

1. **estimate**, per benchmark (oriented so higher is better), from the dev per-sample scores of
   the candidate's runs and the reference's runs: the gain (mean over runs and samples), the
   seed noise (the pooled sd of the runs' means over both arms) and the per-sample term (the
   variance over samples of the per-sample mean difference, over the sample count, as the
   controller computes it), split into what the samples themselves differ by and the runs'
   own noise on each sample, which the controller's mean over m paired seeds divides by m
   (taken at each look's m; from two or three dev runs it would be counted several times
   over: a model that answers a sample at random differs from itself on it between runs);
2. **simulate** :data:`PATHS` comparisons along the controller's own schedule
   (:data:`~rsilab.controller.sequential.LOOKS`), judged at each look by its own clause
   (:func:`~rsilab.controller.acceptance.judge_look`) with its own calibrated efficacy
   boundaries (:func:`~rsilab.controller.sequential.efficacy_bounds`), futility boundaries,
   the next proposal's alpha for the target and
   :data:`~rsilab.controller.acceptance.NON_TARGET_ALPHA` with the tolerance for non-targets
   (all imported, none copied). Each path draws the benchmark's true gain from the dev
   estimate's own uncertainty (seed and sample terms: the dev gain is an estimate, and the race
   winner's leans optimistic), then an accept-tier sample offset (other samples), then
   per-seed scores of head and candidate. Where the dev runs were paired by seed (the built-in
   policy runs every config's k-th run on one seed, :mod:`~rsilab.orchestrator.builtin._seeds`),
   the estimate is the paired differences' and a path's candidate is the head's seed plus the
   seed's difference, as the controller's paired test sees it: a config that changes nothing
   then shows a gain of exactly 0 and is never proposed (drawn as two independent arms, two
   seeds' few-shot draws read as a gain). Runs without shared seeds are drawn as independent
   arms (no credit for a pairing that is not there). Benchmarks are drawn independently of
   each other;
3. **propose** when the share of accepted paths is at least :data:`PROPOSE_AT`, else hold.

The prediction only decides whether to ask; the controller decides alone, on its own seeds, so
its error control is untouched. Fail closed: an arm with fewer than two runs, or a benchmark
without shared dev scores, is "hold". The RNG is seeded by the caller (from the campaign), so a
prediction is reproducible. The accept tier's sample count is unknown to the policy; the dev
tier's stands in for it.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rsilab.controller.acceptance import NON_TARGET_ALPHA, decide, judge_look
from rsilab.controller.sequential import LOOKS, efficacy_bounds, futility_bound
from rsilab.records import DataTier, Evaluation
from rsilab.stats import alpha_for_proposal
from rsilab.store import Store
from rsilab.tasks import Benchmark, Task

PROPOSE_AT = 0.5
"""Propose when the estimated acceptance probability is at least this. Why one half: the
policy proposes once per campaign, so holding gives up the campaign's whole gain, while a
rejected proposal costs the controller's trainings and spends the proposal's alpha on nothing
(the next proposal's is smaller). At one half a proposal is more likely to be accepted than
not; the estimate leans optimistic (the race winner is the best of several on the same dev
scores) and the gain's own uncertainty pulls it towards one half, which a higher threshold
would turn into holding every real but modest gain."""
PATHS = 4000
"""Simulated comparisons per prediction (Monte Carlo sd of the probability <= 0.008)."""
MIN_RUNS = 2
"""Runs an arm needs for a spread to be estimated at all (fewer: hold)."""
CONTROLLER_ALPHA: float = inspect.signature(decide).parameters["alpha"].default
"""The controller's campaign error rate: :func:`decide`'s own default, read, not restated."""

_Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Estimate:
    """One benchmark's dev evidence, oriented so higher is better."""

    gain: float
    """Mean candidate score minus mean reference score."""
    seed_sd: float
    """Pooled sd over runs of a run's mean score (seed noise)."""
    sample_var: float
    """Variance over samples of the per-sample mean difference, over the sample count, as
    observed on these runs (what the controller would compute from them)."""
    gain_var: float
    """Variance of ``gain`` as an estimate: seed term over both arms plus the item term."""
    item_var: float = 0.0
    """Variance over samples of the per-sample *expected* difference: the observed variance
    less what the runs' own noise on each sample adds at these run counts (0 at least)."""
    run_var: float = 0.0
    """Run-to-run variance of one sample's score, candidate's plus reference's (mean over
    samples): what one pair of seeds adds to a sample's difference."""
    samples: int = 1
    """How many samples the estimate shares."""
    diff_sd: float | None = None
    """With the arms paired by seed: the sd over seeds of a seed's mean difference (what the
    controller's paired test sees); None: the arms are independent."""

    def sample_var_at(self, seeds: int) -> float:
        """The per-sample term the controller computes from ``seeds`` paired seeds: the item
        term plus the run noise averaged over that many seeds, over the sample count."""
        return self.item_var_n + self.run_var / seeds / self.samples

    @property
    def item_var_n(self) -> float:
        """:attr:`item_var` over the sample count."""
        return self.item_var / self.samples


@dataclass(frozen=True)
class Prediction:
    """The estimated chance that the controller accepts, and what follows from it."""

    accepted: bool
    """Propose: ``probability`` is at least :data:`PROPOSE_AT`."""
    reason: str
    """The estimates and the probability in words, or why there was nothing to judge."""
    passed: dict[str, bool]
    """Benchmark -> whether it passes in at least :data:`PROPOSE_AT` of the paths (empty when
    nothing could be judged)."""
    probability: float | None = None
    """Share of simulated comparisons accepted (None when nothing could be judged)."""


def score_matrices(
    store: Store, experiment_ids: list[str], benchmark: str, tier: DataTier
) -> dict[str, dict[str, float]]:
    """Experiment -> (sample id -> score) of its latest evaluation of ``benchmark`` on ``tier``
    (experiments without one are left out)."""
    out: dict[str, dict[str, float]] = {}
    for experiment_id in experiment_ids:
        latest: Evaluation | None = None
        for e in store.query_as(Evaluation, fields={"subject_id": experiment_id}):
            mine = e.tier == tier and e.benchmark == benchmark and bool(e.samples)
            if mine and (latest is None or e.created_at > latest.created_at):
                latest = e
        if latest is not None:
            out[experiment_id] = {s.sample_id: s.score for s in latest.samples}
    return out


def estimate(candidate: npt.ArrayLike, reference: npt.ArrayLike) -> Estimate:
    """The :class:`Estimate` of ``candidate[run][sample]`` against ``reference[run][sample]``
    (oriented, the same sample columns, at least two runs each: ``ValueError`` otherwise)."""
    cand = np.asarray(candidate, dtype=np.float64)
    ref = np.asarray(reference, dtype=np.float64)
    if cand.ndim != 2 or ref.ndim != 2 or cand.shape[1] != ref.shape[1]:
        raise ValueError(f"score matrices must share their samples: {cand.shape}, {ref.shape}")
    if min(cand.shape[0], ref.shape[0]) < MIN_RUNS or cand.shape[1] < 2:
        raise ValueError(f"an estimate needs >= {MIN_RUNS} runs and 2 samples: {cand.shape}")
    rows_c, rows_r = cand.mean(axis=1), ref.mean(axis=1)
    squares = ((rows_c - rows_c.mean()) ** 2).sum() + ((rows_r - rows_r.mean()) ** 2).sum()
    seed_var = float(squares) / (len(rows_c) + len(rows_r) - 2)
    n = cand.shape[1]
    observed = float(np.var(cand.mean(axis=0) - ref.mean(axis=0), ddof=1))
    # A sample's mean over k runs carries its run-to-run variance over k: two runs of a model
    # that answers a sample at random half the time differ on it half the time, which the
    # controller's mean over 12-24 seeds mostly averages away. Only the rest - how the
    # candidate's expected score differs from the reference's sample by sample - stays.
    within_c = float(cand.var(axis=0, ddof=1).mean())
    within_r = float(ref.var(axis=0, ddof=1).mean())
    item_var = max(0.0, observed - within_c / len(rows_c) - within_r / len(rows_r))
    gain_var = seed_var * (1.0 / len(rows_c) + 1.0 / len(rows_r)) + item_var / n
    gain = float(rows_c.mean() - rows_r.mean())
    return Estimate(
        gain, math.sqrt(seed_var), observed / n, gain_var, item_var, within_c + within_r, n
    )


def estimate_paired(candidate: npt.ArrayLike, reference: npt.ArrayLike) -> Estimate:
    """The :class:`Estimate` of ``candidate[k][sample]`` against ``reference[k][sample]`` whose
    row ``k`` ran on one seed (oriented, the same shape, at least two seeds: ``ValueError``
    otherwise). Its terms are the paired differences': a config that changes nothing differs
    by exactly 0 on every seed and sample, so its gain and every spread are 0."""
    cand = np.asarray(candidate, dtype=np.float64)
    ref = np.asarray(reference, dtype=np.float64)
    if cand.ndim != 2 or cand.shape != ref.shape:
        raise ValueError(f"paired score matrices must have one shape: {cand.shape}, {ref.shape}")
    if cand.shape[0] < MIN_RUNS or cand.shape[1] < 2:
        raise ValueError(f"a paired estimate needs >= {MIN_RUNS} seeds and 2 samples: {cand.shape}")
    k, n = cand.shape
    diff = cand - ref
    rows = diff.mean(axis=1)
    rows_c, rows_r = cand.mean(axis=1), ref.mean(axis=1)
    squares = ((rows_c - rows_c.mean()) ** 2).sum() + ((rows_r - rows_r.mean()) ** 2).sum()
    seed_var = float(squares) / (2 * k - 2)
    diff_var = float(rows.var(ddof=1))
    observed = float(np.var(diff.mean(axis=0), ddof=1))
    within = float(diff.var(axis=0, ddof=1).mean())  # one pair of seeds' noise on a sample
    item_var = max(0.0, observed - within / k)
    gain_var = diff_var / k + item_var / n
    return Estimate(
        float(rows.mean()),
        math.sqrt(seed_var),
        observed / n,
        gain_var,
        item_var,
        within,
        n,
        diff_sd=math.sqrt(diff_var),
    )


def acceptance_probability(
    estimates: dict[str, Estimate],
    benchmarks: list[Benchmark],
    *,
    proposal_index: int,
    seed: int,
    paths: int = PATHS,
    looks: tuple[int, ...] = LOOKS,
) -> tuple[float, dict[str, float]]:
    """The share of ``paths`` simulated sequential comparisons (see the module docstring) that
    the controller's rule accepts, and each benchmark's share of passes, for the benchmarks
    whose ``estimates`` are given (every one of ``benchmarks``), at ``proposal_index``.
    Deterministic in ``seed``."""
    rng = np.random.default_rng(seed)
    alpha_j = alpha_for_proposal(proposal_index, CONTROLLER_ALPHA)
    cap = looks[-1]
    arms: dict[str, tuple[_Array, _Array]] = {}
    for bench in benchmarks:
        e = estimates[bench.name]
        truth = e.gain + math.sqrt(e.gain_var) * rng.standard_normal(paths)
        offset = math.sqrt(e.item_var_n) * rng.standard_normal(paths)  # accept-tier samples
        head = e.seed_sd * rng.standard_normal((paths, cap))
        if e.diff_sd is None:  # independent arms
            cand = (truth + offset)[:, None] + e.seed_sd * rng.standard_normal((paths, cap))
        else:  # paired by seed: the candidate is the head's seed plus the seed's difference
            cand = head + (truth + offset)[:, None] + e.diff_sd * rng.standard_normal((paths, cap))
        arms[bench.name] = (cand, head)
    passed = {b.name: np.zeros(paths, bool) for b in benchmarks}
    alive = np.ones(paths, bool)
    accepted = np.zeros(paths, bool)
    for i, m in enumerate(looks):
        if m < 2:
            continue  # the controller decides nothing below two paired seeds
        futile = np.zeros(paths, bool)
        for bench in benchmarks:
            level = alpha_j if bench.target else NON_TARGET_ALPHA
            cand, head = arms[bench.name]
            result = judge_look(
                cand[:, :m],
                head[:, :m],
                bound=efficacy_bounds(level, looks)[i],
                futility=futility_bound(i, looks),
                margin=0.0 if bench.target else bench.tolerance,
                target=bench.target,
                sample_var=estimates[bench.name].sample_var_at(m),
            )
            passed[bench.name] |= result.passed & alive
            futile |= result.futile & ~passed[bench.name]
        now = alive & np.logical_and.reduce([passed[b.name] for b in benchmarks])
        accepted |= now
        alive &= ~now & ~futile
    rates = {name: float(p.mean()) for name, p in passed.items()}
    return float(accepted.mean()), rates


def predict_acceptance(
    store: Store,
    task: Task,
    candidate_ids: list[str],
    reference_ids: list[str],
    *,
    proposal_index: int,
    tier: DataTier,
    seed: int,
    paired: bool = False,
) -> Prediction:
    """The prediction for ``candidate_ids`` against ``reference_ids`` from their ``tier``
    scores, at ``proposal_index``, simulated with RNG ``seed`` (see the module docstring).
    ``candidate_ids`` are oldest first; with more than :data:`MIN_RUNS` of them the first (the
    run the search selected the config on) is left out of the estimate. ``paired``: the i-th
    candidate and the i-th reference ran on one seed, lowest seed first (the first pair holds
    the selection run, left out likewise), and the estimate is the paired differences'
    (:func:`estimate_paired`); the lists must then be equally long.
    Held, with the reason, when a benchmark lacks scores on either side, fewer than two samples
    are shared, or an arm has fewer than two runs (fail closed)."""
    if paired and len(candidate_ids) != len(reference_ids):
        raise ValueError(f"{len(candidate_ids)} candidates paired with {len(reference_ids)}")
    if len(candidate_ids) > MIN_RUNS:
        # the first run is the one the search picked the config on: its score is the most
        # selected (the winner's curse); the race's re-runs are judged without it
        candidate_ids = candidate_ids[1:]
        reference_ids = reference_ids[1:] if paired else reference_ids
    estimates: dict[str, Estimate] = {}
    for bench in task.benchmarks:
        cand = score_matrices(store, candidate_ids, bench.name, tier)
        ref = score_matrices(store, reference_ids, bench.name, tier)
        if paired and (len(cand) != len(candidate_ids) or len(ref) != len(reference_ids)):
            return Prediction(False, f"a paired run has no {tier} scores of {bench.name}", {})
        rows = [*cand.values(), *ref.values()]
        shared = sorted(set.intersection(*(set(r) for r in rows))) if rows else []
        if not cand or not ref or len(shared) < 2:
            return Prediction(False, f"no {tier} scores of {bench.name} to compare", {})
        k = min(len(cand), len(ref))
        if k < MIN_RUNS:
            return Prediction(
                False, f"too few runs to judge ({k} in an arm; the estimate needs {MIN_RUNS})", {}
            )
        sign = 1.0 if bench.higher_is_better else -1.0
        judge = estimate_paired if paired else estimate
        estimates[bench.name] = judge(
            sign * np.array([[cand[x][i] for i in shared] for x in candidate_ids if x in cand]),
            sign * np.array([[ref[x][i] for i in shared] for x in reference_ids if x in ref]),
        )
    probability, rates = acceptance_probability(
        estimates, list(task.benchmarks), proposal_index=proposal_index, seed=seed
    )
    accepted = probability >= PROPOSE_AT
    parts = [
        f"{name}: gain {e.gain:+.4g} (sd {math.sqrt(e.gain_var):.2g}), seed sd {e.seed_sd:.2g}, "
        + ("" if e.diff_sd is None else f"paired seed sd {e.diff_sd:.2g}, ")
        + f"sample se {math.sqrt(e.sample_var):.2g} ({math.sqrt(e.sample_var_at(LOOKS[-1])):.2g} "
        f"at {LOOKS[-1]} seeds), passes {rates[name]:.2f}"
        for name, e in estimates.items()
    ]
    reason = (
        f"estimated acceptance probability {probability:.2f} "
        f"({'>=' if accepted else '<'} {PROPOSE_AT:.2f}) at proposal {proposal_index}: "
        + "; ".join(parts)
    )
    passed = {name: rate >= PROPOSE_AT for name, rate in rates.items()}
    return Prediction(accepted, reason, passed, probability)
