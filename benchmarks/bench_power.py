"""Power and cost of the controller's sequential paired rule, simulated at the score level.

Each simulated proposal draws per-seed mean scores for the head (N(0, 1): the unit is the
head's per-seed sd) and the candidate (N(gain, 1)), independent across arms (no common random
numbers help: the least favourable pairing; the rows marked "seed correlation 0.5" share half
of each seed's variance between the arms, as two similar configs trained under one seed do), and
runs the rule's own per-look function
(:func:`rsilab.controller.acceptance.judge_look`) over the default looks. Sample noise is left
out: it enters the rule as an extra variance term that does not shrink with seeds, so these are
upper bounds of power on a task with few private samples. Cost counts controller trainings per
proposal: the candidate's seeds plus the head's, which trains on the same (proposal-specific)
seeds, so twice the seeds the comparison reached.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rsilab.controller.acceptance import NON_TARGET_ALPHA, judge_look
from rsilab.controller.sequential import LOOKS, efficacy_bounds, futility_bound
from rsilab.stats import alpha_for_proposal


def _simulate(
    gain: float,
    alpha: float,
    n: int,
    seed: int,
    *,
    target: bool,
    margin: float = 0.0,
    rho: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    head = rng.standard_normal((n, LOOKS[-1]))
    own = rng.standard_normal((n, LOOKS[-1]))
    cand = np.sqrt(rho) * head + np.sqrt(1.0 - rho) * own + gain
    bounds = efficacy_bounds(alpha, LOOKS)
    done = np.zeros(n, bool)
    passed = np.zeros(n, bool)
    used = np.zeros(n, int)
    for i, m in enumerate(LOOKS):
        r = judge_look(
            cand[:, :m], head[:, :m], bound=bounds[i], futility=futility_bound(i, LOOKS),
            margin=margin, target=target,
        )  # fmt: skip
        passed |= ~done & r.passed
        stop = ~done & (r.passed | r.futile | (i == len(LOOKS) - 1))
        used[stop] = m
        done |= stop
    return passed, 2 * used


def run(quick: bool) -> list[dict[str, Any]]:
    """Rows: acceptance (or non-inferiority pass) rate and trainings per proposal."""
    n = 20_000 if quick else 200_000
    rows: list[dict[str, Any]] = []
    for j in (1, 2, 3):
        alpha_j = alpha_for_proposal(j)
        for gain in (0.0, 0.5, 1.0, 1.5):
            passed, cost = _simulate(gain, alpha_j, n, seed=100 * j + int(10 * gain), target=True)
            rows.append(_row(f"target j={j}", f"gain {gain:g} sd", passed, cost))
    for j in (1, 2, 3):
        passed, cost = _simulate(1.0, alpha_for_proposal(j), n, seed=500 + j, target=True, rho=0.5)
        rows.append(_row(f"target j={j}, seed correlation 0.5", "gain 1 sd", passed, cost))
    for drop in (0.0, 1.0, 2.0):
        passed, cost = _simulate(
            -drop, NON_TARGET_ALPHA, n, seed=900 + int(drop), target=False, margin=1.0
        )
        rows.append(_row("non-target, tolerance 1 sd", f"drop {drop:g} tolerance", passed, cost))
    return rows


def _row(case: str, truth: str, passed: np.ndarray, cost: np.ndarray) -> dict[str, Any]:
    return {
        "case": case,
        "truth": truth,
        "pass rate": round(float(passed.mean()), 4),
        "trainings mean": round(float(cost.mean()), 1),
        "trainings median": float(np.median(cost)),
        "trainings p90": float(np.percentile(cost, 90)),
    }


if __name__ == "__main__":
    for row in run(quick=True):
        print(row)
