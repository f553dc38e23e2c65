"""The Host Controller: evaluation throughput on digits, false acceptance on synthetic.

Two suites (see ``benchmarks/__main__.py``): :func:`run_throughput` judges a few digits configs
in a real sandbox; :func:`run_false_acceptance` runs simulated campaigns on ``synthetic``, whose
true score of every config is known, and compares rsilab's acceptance rule with a greedy
"accept the best dev score" loop on the same candidates.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rsilab.controller.host import DEFAULT_MAX_PROPOSALS, HostController
from rsilab.executors.local import LocalExecutor, available_cores
from rsilab.records import Candidate, CandidateState, DataTier
from rsilab.sandbox.base import Sandbox
from rsilab.sandbox.select import default_sandbox
from rsilab.store.lab import Lab
from rsilab.tasks import Task, derive_seed, get_task, lab_secret, load_manifest, run_experiment
from rsilab.tasks.builtin.synthetic import true_score

SEEDS = 3
ACTOR = "bench"


@dataclass
class _Env:
    """A throwaway lab with the default sandbox and a local executor."""

    root: Path
    lab: Lab
    sandbox: Sandbox
    executor: LocalExecutor


@contextmanager
def _env() -> Iterator[_Env]:
    with tempfile.TemporaryDirectory(prefix="rsilab-bench-ctl-") as tmp:
        root = Path(tmp)
        lab = Lab.init(root / "lab")
        # Created here, before campaigns run on threads: lab_secret's first creation is not
        # safe against a concurrent reader (it can read the file before it is written).
        lab_secret(lab.path)
        sandbox = default_sandbox()
        executor = LocalExecutor(sandbox, lab.artifacts, slots=min(SEEDS, available_cores()))
        try:
            yield _Env(root, lab, sandbox, executor)
        finally:
            executor.shutdown()
            sandbox.close()
            lab.close()


def _harness_with(task: Task, config: Mapping[str, Any], dest: Path) -> Path:
    """A copy of the task's harness at ``dest`` with ``config`` written to its config file."""
    shutil.copytree(task.harness, dest, symlinks=True)
    name = load_manifest(dest).config or "config.json"
    (dest / name).write_text(json.dumps(dict(config), indent=2) + "\n")
    return dest


def _initial_config(task: Task) -> dict[str, Any]:
    name = load_manifest(task.harness).config or "config.json"
    config: dict[str, Any] = json.loads((task.harness / name).read_text())
    return config


def _describe(config: Mapping[str, Any], base: Mapping[str, Any]) -> str:
    changed = [f"{k}={v}" for k, v in config.items() if base.get(k) != v]
    return ", ".join(changed) or "(initial config)"


# --- 1. throughput on digits ---------------------------------------------------------------

DIGITS_CONFIGS: list[dict[str, Any]] = [
    {"hidden": 64, "epochs": 20, "lr": 0.01, "optimizer": "adam"},
    {"hidden": 32, "epochs": 10, "lr": 0.1},
    {"hidden": 128, "epochs": 30, "lr": 0.003, "optimizer": "adam", "batch_size": 32},
    {"hidden": 16, "epochs": 8, "lr": 0.3, "weight_decay": 0.001},
    {"hidden": 256, "epochs": 15, "lr": 0.001, "optimizer": "adam", "batch_size": 128},
]
"""Candidates from the digits search space, judged in this order (quick: the first two)."""


def run_throughput(quick: bool) -> list[dict[str, Any]]:
    """Controller evaluation throughput on digits: baseline and candidates judged, 3 seeds.

    Each row is one controller evaluation in a real sandbox (the default one): re-training with
    3 controller seeds (the baseline 6) in parallel over 2 executor slots, predicting both private
    tiers, and the acceptance decision with its records. *host CPU s* is CPU time of the
    controller's own process (records, ledger, guards), apart from the sandboxed jobs.
    Candidates are proposals 1..N of one campaign, judged one after another against the
    current head. A candidate is accepted when the lower bound of its gain (at level
    1 - 2 alpha_j) exceeds the spread of the head's mean over its seeds (sd of its per-seed
    means / sqrt(k)); the starting config's seeds spread widely, so with 3 seeds even a large
    gain can be rejected and a verdict can differ between runs.
    Informational: no target.
    """
    task = get_task("digits")
    configs = DIGITS_CONFIGS[: 2 if quick else 5]
    base = _initial_config(task)
    rows: list[dict[str, Any]] = []
    with _env() as env:
        ctl = HostController(env.lab, task, env.executor, seeds=SEEDS)
        load = os.getloadavg()[0]
        wall, cpu = time.perf_counter(), time.process_time()
        version = ctl.baseline(actor=ACTOR)
        rows.append(
            {
                "system": "baseline H0/M0",
                "config": _describe(base, base),
                "seconds": round(time.perf_counter() - wall, 1),
                "host CPU s": round(time.process_time() - cpu, 2),
                "load avg (1 min) before": round(load, 2),
                "verdict": "baseline",
                "final accuracy": round(version.scores["accuracy"].value, 3),
            }
        )
        seconds = []
        for i, change in enumerate(configs, 1):
            config = {**base, **change}
            tree = _harness_with(task, config, env.root / f"candidate-{i}")
            sha = env.lab.artifacts.put_tree(tree).sha256
            load = os.getloadavg()[0]
            wall, cpu = time.perf_counter(), time.process_time()
            candidate = ctl.propose(sha, campaign_id="bench-throughput", proposer=ACTOR)
            candidate = ctl.judge(candidate.id)
            seconds.append(time.perf_counter() - wall)
            row = _throughput_row(i, config, base, candidate, seconds[-1], cpu)
            rows.append({**row, "load avg (1 min) before": round(load, 2)})
    median = statistics.median(seconds)
    rows.append(
        {
            "system": f"per candidate (median of {len(seconds)})",
            "seconds": round(median, 1),
            "candidates / min": round(60.0 / median, 2),
            "slots": min(SEEDS, available_cores()),
            "sandbox": env.sandbox.name,
        }
    )
    return rows


def _throughput_row(
    index: int,
    config: Mapping[str, Any],
    base: Mapping[str, Any],
    candidate: Candidate,
    seconds: float,
    cpu_start: float,
) -> dict[str, Any]:
    target = next((d for d in candidate.decisions if d.target), None)
    return {
        "system": f"candidate {index}",
        "config": _describe(config, base),
        "seconds": round(seconds, 1),
        "host CPU s": round(time.process_time() - cpu_start, 2),
        "verdict": str(candidate.state.value),
        "accept-tier gain vs head [lower bound]": "-"
        if target is None
        else f"{target.gain:+.3f} [{target.low:+.3f}]",
        "bound must exceed (head's seed spread)": "-"
        if target is None
        else f"{target.threshold:.3f}",
    }


# --- 2. false acceptance on synthetic ------------------------------------------------------

TOLERANCE = 0.02
"""Robustness tolerance of the synthetic task (its non-target benchmark)."""
PROPOSALS = 6
"""Proposals per campaign (below the controller's cap of 25, so alpha spending decides)."""
CAMPAIGN_WORKERS = 2
"""Campaigns run at once, so the executor's slots stay busy while one campaign writes records."""
BUDGET_S = {True: 100.0, False: 12 * 60.0}
"""Seconds (quick, full) after which no new campaign starts; at least MIN_CAMPAIGNS run."""
MIN_CAMPAIGNS = 2


@dataclass(frozen=True)
class _Truth:
    """True scores of a config (from the task's exact truth function)."""

    quality: float
    robustness: float

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> _Truth:
        return cls(true_score(config, "base", "quality"), true_score(config, "base", "robustness"))


@dataclass(frozen=True)
class _Effect:
    """The true effect of a config over another (an accepted version over the head it
    replaced, or a proposal over its campaign's start)."""

    quality_gain: float
    robustness_change: float

    @classmethod
    def between(cls, head: Mapping[str, Any], new: Mapping[str, Any]) -> _Effect:
        old, now = _Truth.of(head), _Truth.of(new)
        return cls(now.quality - old.quality, now.robustness - old.robustness)

    @property
    def positive(self) -> bool:
        """The definition in the table notes: a true quality gain, robustness within tolerance."""
        return self.quality_gain > 0 and self.robustness_change >= -TOLERANCE


@dataclass
class _Campaign:
    """What one simulated campaign produced, per rule."""

    accepted: dict[str, list[_Effect]] = field(default_factory=dict)
    """Rule name -> the true effect of each version it accepted."""
    proposals: list[_Effect] = field(default_factory=list)
    judge_s: list[float] = field(default_factory=list)
    dev_s: list[float] = field(default_factory=list)


def _start_config(rng: random.Random) -> dict[str, Any]:
    """A campaign's starting head: a random point of the search space, often far from good."""
    return {
        "lr": 10 ** rng.uniform(-5.0, 0.0),
        "width": round(2 ** rng.uniform(2.0, 7.0)),
        "dropout": rng.uniform(0.0, 0.6),
        "epochs": rng.randint(1, 16),
        "optimizer": rng.choice(["sgd", "adam"]),
    }


def _perturb(config: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    """``config`` with one or two knobs moved a little (within the search space's bounds)."""
    out = dict(config)
    for knob in rng.sample(sorted(out), rng.choice([1, 2])):
        if knob == "lr":
            out[knob] = min(1.0, max(1e-5, out[knob] * 10 ** rng.gauss(0.0, 0.6)))
        elif knob == "width":
            out[knob] = min(1024, max(4, round(out[knob] * 2 ** rng.gauss(0.0, 1.4))))
        elif knob == "dropout":
            out[knob] = min(0.8, max(0.0, out[knob] + rng.gauss(0.0, 0.16)))
        elif knob == "epochs":
            out[knob] = min(64, max(1, round(out[knob] * 2 ** rng.gauss(0.0, 1.4))))
        else:
            out[knob] = "adam" if out[knob] == "sgd" else "sgd"
    return out


def _campaign(env: _Env, task: Task, index: int) -> _Campaign:
    """One campaign: a random start, PROPOSALS perturbations of it, both rules on them."""
    rng = random.Random(f"bench-controller/{index}")
    start = _start_config(rng)
    candidates = [_perturb(start, rng) for _ in range(PROPOSALS)]
    folder = env.root / f"campaign-{index}"
    start_tree = _harness_with(task, start, folder / "start")
    trees = [_harness_with(task, c, folder / f"candidate-{j}") for j, c in enumerate(candidates)]
    result = _Campaign(proposals=[_Effect.between(start, c) for c in candidates])
    _judge_all(env, task, index, start, start_tree, candidates, trees, result)
    _greedy(env, task, index, start, [start_tree, *trees], candidates, result)
    return result


def _judge_all(
    env: _Env,
    task: Task,
    index: int,
    start: dict[str, Any],
    start_tree: Path,
    candidates: list[dict[str, Any]],
    trees: list[Path],
    result: _Campaign,
) -> None:
    """rsilab's rule: a lineage whose baseline is ``start``; every candidate proposed, judged."""
    ctl = HostController(
        env.lab,
        task.model_copy(update={"harness": start_tree}),
        env.executor,
        lineage=f"campaign-{index}",
        seeds=SEEDS,
    )
    configs = {ctl.baseline(actor=ACTOR).id: start}
    accepted = result.accepted.setdefault("rsilab", [])
    for config, tree in zip(candidates, trees, strict=True):
        sha = env.lab.artifacts.put_tree(tree).sha256
        wall = time.perf_counter()
        candidate = ctl.propose(sha, campaign_id=f"bench-fa-{index}", proposer=ACTOR)
        candidate = ctl.judge(candidate.id)
        result.judge_s.append(time.perf_counter() - wall)
        if candidate.state is CandidateState.ACCEPTED and candidate.version_id is not None:
            # judged against the head at that moment, which an earlier acceptance may have moved
            head = configs[candidate.compared_to or ""]
            accepted.append(_Effect.between(head, config))
            configs[candidate.version_id] = config


def _greedy(
    env: _Env,
    task: Task,
    index: int,
    start: dict[str, Any],
    trees: list[Path],
    candidates: list[dict[str, Any]],
    result: _Campaign,
) -> None:
    """The greedy rules: one dev run each (head first), keep the best dev quality if it beats
    the head's; the guarded variant first drops candidates whose dev robustness falls more
    than the tolerance below the head's."""
    secret = lab_secret(env.lab.path)

    def dev(j: int) -> tuple[float, float, float]:
        seed = derive_seed(secret, "bench-greedy", str(index), str(j)) % 2**31
        with tempfile.TemporaryDirectory(dir=env.root) as tmp:
            workspace = Path(tmp) / "workspace"
            shutil.copytree(trees[j], workspace, symlinks=True)
            out = run_experiment(
                task, env.sandbox, secret, seed=seed, tier=DataTier.DEV, workspace=workspace
            )
        return out.scores["quality"], out.scores["robustness"], out.seconds

    with ThreadPoolExecutor(max_workers=env.executor.slots) as pool:
        (head_q, head_r, head_s), *scores = pool.map(dev, range(len(trees)))
    result.dev_s += [head_s, *(s for _, _, s in scores)]
    guarded = [i for i, (_, r, _) in enumerate(scores) if r >= head_r - TOLERANCE]
    for rule, pool_ in (("greedy", range(len(scores))), ("greedy-guarded", guarded)):
        chosen = result.accepted.setdefault(rule, [])
        best = max(pool_, key=lambda i: scores[i][0], default=None)
        if best is not None and scores[best][0] > head_q:
            chosen.append(_Effect.between(start, candidates[best]))


def _run_campaigns(env: _Env, task: Task, budget_s: float) -> list[_Campaign]:
    """Campaigns 0, 1, ... on CAMPAIGN_WORKERS threads until ``budget_s`` has passed."""
    deadline = time.monotonic() + budget_s
    lock = threading.Lock()
    counter = iter(range(10**6))
    results: dict[int, _Campaign] = {}

    def worker() -> None:
        while True:
            with lock:
                index = next(counter)
            if index >= MIN_CAMPAIGNS and time.monotonic() > deadline:
                return
            results[index] = _campaign(env, task, index)

    with ThreadPoolExecutor(max_workers=CAMPAIGN_WORKERS) as pool:
        for future in [pool.submit(worker) for _ in range(CAMPAIGN_WORKERS)]:
            future.result()
    return [results[i] for i in sorted(results)]


def _wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a proportion k / n (95% by default)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


RULES = {
    "rsilab": f"rsilab: HostController.judge ({SEEDS} seeds, alpha spending, cap "
    f"{DEFAULT_MAX_PROPOSALS})",
    "greedy": "best dev score (1 dev run each, quality only)",
    "greedy-guarded": "best dev score, dev robustness within tolerance",
}


def _rule_row(rule: str, campaigns: list[_Campaign]) -> dict[str, Any]:
    accepted = [a for c in campaigns for a in c.accepted[rule]]
    false = [a for a in accepted if not a.positive]
    no_gain = sum(1 for a in false if a.quality_gain <= 0)
    regressed = [a.robustness_change for a in false if a.robustness_change < -TOLERANCE]
    worst = f"; worst robustness {min(regressed):+.3f}" if regressed else ""
    low, high = _wilson(len(false), len(accepted))
    rate = len(false) / len(accepted) if accepted else 0.0
    bad = sum(1 for c in campaigns if any(not a.positive for a in c.accepted[rule]))
    return {
        "rule": RULES[rule],
        "campaigns": len(campaigns),
        "proposals / campaign": PROPOSALS,
        "accepted versions": len(accepted),
        "false acceptances": f"{len(false)} ({no_gain} no quality gain, {len(regressed)} "
        f"robustness beyond tolerance{worst})",
        "false-acceptance rate [Wilson 95%]": f"{_pct(rate)} [{_pct(low)}, {_pct(high)}]",
        "campaigns with a false acceptance": f"{bad} ({_pct(bad / len(campaigns))})",
        "mean true gain of accepted (quality / robustness)": (
            f"{statistics.fmean(a.quality_gain for a in accepted):+.3f} / "
            f"{statistics.fmean(a.robustness_change for a in accepted):+.3f}"
            if accepted
            else "-"
        ),
        "target": "<= 5%" if rule == "rsilab" else "reference",
    }


def run_false_acceptance(quick: bool) -> list[dict[str, Any]]:
    """False acceptance on synthetic: rsilab's rule vs accepting the best dev score.

    Each campaign starts a lineage at a random config of the search space and draws 6
    candidates up front, each the start with one or two knobs moved a little, so many have a
    true effect near zero or below and some above. Both rules see the same candidates, lab and
    splits. rsilab's rule: each candidate proposed (numbered 1..6 in its campaign) and judged
    by `HostController.judge` against the lineage's current head (which an earlier acceptance
    in the campaign may have moved). Greedy: one dev run of the start and of each candidate
    (one seed each, distinct seeds), the best dev quality accepted if it beats the start's
    (at most one per campaign); the guarded variant first drops candidates whose dev
    robustness is more than the tolerance below the start's.

    A candidate's true effect is *positive* iff its true quality gain over the head it
    replaced is > 0 AND its true robustness loss is within the tolerance (>= -0.02); a false
    acceptance is an accepted version whose true effect is not positive (split into those
    with no quality gain and those with a robustness loss beyond tolerance). Rate = false
    acceptances / accepted versions, Wilson 95% interval. Target: at most 5% for rsilab's
    rule. Campaigns run until a time budget (quick: 100 s, full: 12 min) is spent, two at a
    time on one executor; the last row describes the proposals themselves.
    """
    task = get_task("synthetic")
    if task.benchmark("robustness").tolerance != TOLERANCE:
        raise RuntimeError("synthetic's robustness tolerance changed: update TOLERANCE")
    with _env() as env:
        wall = time.perf_counter()
        campaigns = _run_campaigns(env, task, BUDGET_S[quick])
        minutes = (time.perf_counter() - wall) / 60
    rows = [_rule_row(rule, campaigns) for rule in RULES]
    judge_s = statistics.median(s for c in campaigns for s in c.judge_s)
    dev_s = statistics.median(s for c in campaigns for s in c.dev_s)
    rows[0]["median s per evaluation"] = f"{judge_s:.2f} (judge, {SEEDS} seeds)"
    for row in rows[1:]:
        row["median s per evaluation"] = f"{dev_s:.2f} (dev run, 1 seed)"
    proposals = [p for c in campaigns for p in c.proposals]
    rows.append(
        {
            "rule": "(every proposal, vs its campaign's start)",
            "campaigns": len(campaigns),
            "proposals / campaign": PROPOSALS,
            "accepted versions": f"{len(proposals)} proposals: "
            f"{sum(p.positive for p in proposals)} truly positive, "
            f"{sum(1 for p in proposals if p.quality_gain <= 0)} with no quality gain, "
            f"{sum(1 for p in proposals if p.quality_gain > 0.05)} gaining > 0.05",
            "median s per evaluation": f"{minutes:.1f} min in all",
        }
    )
    return rows
