"""Campaign-level false acceptance and power of the controller's rule on synthetic's own noise.

Every campaign gets its own lab secret (so its own controller seeds) and a random starting head
(:func:`benchmarks.bench_controller._start_config`). Scores are produced exactly as synthetic's
harness produces them, in process and without the sandbox: the packaged ``synth.py`` gives a
config's true score per benchmark and a training seed's noise; a model's quality is their sum
clipped to [0, 1], and a private sample is answered right when its uniform draw ``u`` (400 per
benchmark, fresh for every campaign, as the task's generator draws them) lies under that
quality. The controller's seeds come from :func:`rsilab.controller.evaluation.controller_seeds`
on a subject of (campaign, head, proposal index), and each proposal is judged look by look by the
rule itself (:func:`rsilab.controller.acceptance.decide` over
:data:`rsilab.controller.sequential.LOOKS`), carrying passed benchmarks across looks as the Host
Controller does. An accepted candidate becomes the head.

How the noise enters: synthetic's seed noise depends on the seed only, so a candidate and its
head trained on the same seed share it and the paired difference cancels it; what is left is the
sample term (which samples fall between the two qualities), which the rule adds to the standard
error. This makes synthetic an easy case for the paired rule; the independent-arm simulation of
``bench_power`` is the hard one.

Null proposals (three per campaign, one of each kind, in a random order): *no-op* (the head's
own config, as a change that does not alter behaviour), *no gain* (another config whose true
quality gain is in [-0.01, 0] with robustness kept), *regression* (a true quality gain of at
least 0.02 while robustness falls by one to two tolerances: a real gain the rule must still
refuse). A campaign has a false acceptance when any of its proposals is accepted.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.bench_controller import _perturb, _start_config, _wilson
from rsilab.controller.acceptance import decide
from rsilab.controller.evaluation import controller_seeds
from rsilab.controller.sequential import LOOKS
from rsilab.records import DataTier
from rsilab.tasks import Task, get_task
from rsilab.tasks.builtin.synthetic import _synth

SAMPLES = 400
"""Private (accept-tier) samples per benchmark, as synthetic's generator makes them."""
TOLERANCE = 0.02
"""Synthetic's robustness tolerance, stated here independently of the task."""
NULL_KINDS = ("no-op", "no gain", "regression")
CAMPAIGNS = {True: 150, False: 600}
"""Campaigns (quick, full): at least 450 in a full run, as the protocol requires."""

Config = dict[str, Any]


@dataclass
class Proposal:
    kind: str
    accepted: bool
    trainings: int


def _quality(config: Config, variant: str, bench: str, seed: int) -> float:
    synth = _synth()
    q = float(synth.true_score(dict(config), variant, bench)) + float(synth.seed_noise(seed, bench))
    return min(1.0, max(0.0, q))


def _scores(
    config: Config, variant: str, seeds: list[int], draws: Mapping[str, np.ndarray]
) -> dict[tuple[str, DataTier], np.ndarray]:
    """Per-seed, per-sample scores (1 right, 0 wrong) of each benchmark on the accept tier."""
    out = {}
    for bench, u in draws.items():
        qualities = np.array([_quality(config, variant, bench, s) for s in seeds])
        out[(bench, DataTier.ACCEPT)] = (u[None, :] < qualities[:, None]).astype(np.float64)
    return out


def judge(
    task: Task,
    subject: str,
    secret: bytes,
    head: tuple[Config, str],
    cand: tuple[Config, str],
    j: int,
    draws: Mapping[str, np.ndarray],
) -> tuple[bool, int]:
    """(accepted, controller trainings) of proposal ``j``: looks until the rule is final."""
    seeds = controller_seeds(secret, subject, LOOKS[-1])
    head_scores = _scores(*head, seeds, draws)
    cand_scores = _scores(*cand, seeds, draws)
    passed: frozenset[str] = frozenset()
    for m in LOOKS:
        decision = decide(
            task,
            {k: v[:m] for k, v in cand_scores.items()},
            {k: v[:m] for k, v in head_scores.items()},
            proposal_index=j,
            passed_before=passed,
        )
        passed = decision.passed
        if decision.final:
            return decision.accepted, 2 * m
    raise AssertionError("the last look is always final")


def _true(config: Config, variant: str, bench: str) -> float:
    return float(_synth().true_score(dict(config), variant, bench))


def _find(
    head: Config, rng: random.Random, keep: Callable[[float, float], bool], tries: int = 4000
) -> Config | None:
    """A perturbation of ``head`` whose (quality gain, robustness change) ``keep`` accepts."""
    q0, r0 = _true(head, "base", "quality"), _true(head, "base", "robustness")
    for _ in range(tries):
        c = _perturb(head, rng)
        if rng.random() < 0.3:
            c = _perturb(c, rng)
        if keep(_true(c, "base", "quality") - q0, _true(c, "base", "robustness") - r0):
            return c
    return None


def null_candidate(kind: str, head: Config, rng: random.Random) -> Config | None:
    """A candidate config of null ``kind`` against ``head`` (None: none found nearby)."""
    if kind == "no-op":
        return dict(head)
    if kind == "no gain":
        return _find(head, rng, lambda dq, dr: -0.01 <= dq <= 0.0 and dr >= -TOLERANCE / 2)
    return _find(head, rng, lambda dq, dr: dq >= 0.02 and -2 * TOLERANCE <= dr <= -TOLERANCE)


def campaign(index: int, task: Task) -> list[Proposal]:
    """One campaign of three null proposals against a random start (see the module docstring)."""
    rng = random.Random(f"null-campaign/{index}")
    secret = hashlib.sha256(f"null-campaign-secret/{index}".encode()).digest()
    draws = {b: np.random.default_rng(rng.getrandbits(32)).random(SAMPLES) for b in _BENCHES}
    head = _start_config(rng)
    out = []
    kinds = list(NULL_KINDS)
    rng.shuffle(kinds)
    for j, kind in enumerate(kinds, start=1):
        cand = null_candidate(kind, head, rng)
        if cand is None:
            continue
        subject = f"compare/synthetic/null-{index}/{sorted(head.items())}/{j}"
        accepted, trainings = judge(task, subject, secret, (head, "base"), (cand, "base"), j, draws)
        out.append(Proposal(kind, accepted, trainings))
        if accepted:
            head = cand
    return out


_BENCHES = ("quality", "robustness")


def power_rows(task: Task, n: int) -> list[dict[str, Any]]:
    """Acceptance of real gains, by code variant (exact effects), at proposals 1-3."""
    rows = []
    sd = float(_synth().NOISE_SD)
    for variant in ("label_smoothing", "warmup"):
        effect = _synth().VARIANTS[variant]
        for j in (1, 2, 3):
            accepted, cost = 0, []
            for i in range(n):
                rng = random.Random(f"power/{variant}/{j}/{i}")
                secret = hashlib.sha256(f"power-secret/{variant}/{j}/{i}".encode()).digest()
                draws = {
                    b: np.random.default_rng(rng.getrandbits(32)).random(SAMPLES) for b in _BENCHES
                }
                head = _start_config(rng)
                while _true(head, "base", "quality") > 0.9:  # keep the gain clear of the clip
                    head = _start_config(rng)
                ok, trainings = judge(
                    task, f"power/{i}", secret, (head, "base"), (head, variant), j, draws
                )
                accepted += ok
                cost.append(trainings)
            rows.append(
                {
                    "case": f"{variant}, proposal {j}",
                    "true quality gain": f"{effect['quality']:+.3f} "
                    f"({effect['quality'] / sd:.2f} seed sd)",
                    "true robustness change": f"{effect['robustness']:+.3f}",
                    "accepted": f"{accepted}/{n} ({accepted / n:.1%})",
                    "trainings median / mean / p90": _cost(cost),
                }
            )
    return rows


def _cost(cost: list[int]) -> str:
    a = np.array(cost)
    return f"{np.median(a):.0f} / {a.mean():.1f} / {np.percentile(a, 90):.0f}"


def run(quick: bool) -> list[dict[str, Any]]:
    """The campaign row, one row per null kind, then the power rows on synthetic."""
    task = get_task("synthetic")
    n = CAMPAIGNS[quick]
    proposals = [campaign(i, task) for i in range(n)]
    bad = sum(1 for c in proposals if any(p.accepted for p in c))
    _, high = _wilson(bad, n)
    flat = [p for c in proposals for p in c]
    rows: list[dict[str, Any]] = [
        {
            "case": f"campaigns of {len(NULL_KINDS)} null proposals",
            "true quality gain": "<= 0, or robustness beyond tolerance",
            "true robustness change": "-",
            "accepted": f"{bad}/{n} campaigns with a false acceptance "
            f"({bad / n:.2%}; Wilson 95% upper {high:.2%}; target <= 5%)",
            "trainings median / mean / p90": _cost([p.trainings for p in flat]),
        }
    ]
    for kind in NULL_KINDS:
        mine = [p for p in flat if p.kind == kind]
        hits = sum(p.accepted for p in mine)
        rows.append(
            {
                "case": f"null proposals: {kind}",
                "true quality gain": {
                    "no-op": "0 (same config)",
                    "no gain": "[-0.01, 0]",
                    "regression": ">= +0.02",
                }[kind],
                "true robustness change": {
                    "no-op": "0",
                    "no gain": ">= -0.01",
                    "regression": "[-0.04, -0.02]",
                }[kind],
                "accepted": f"{hits}/{len(mine)}",
                "trainings median / mean / p90": _cost([p.trainings for p in mine]),
            }
        )
    rows += power_rows(task, 40 if quick else 200)
    return rows


if __name__ == "__main__":
    for row in run(quick=True):
        print(row)
