"""The registered search protocol: rsilab against its peers at equal compute.

Everything the runs do is fixed by ``benchmarks/registration/search-protocol.toml`` (tasks,
seeds, budgets, policies, the primary comparison, Holm for the rest), committed before the runs.
A run refuses to start when anything under ``src/`` differs from the registration's
``frozen_commit`` (run it from a worktree of that commit when later work has changed ``src/``).
The runs go through :mod:`benchmarks.search.protocol`, one lab per task, and each finished run is
kept in ``benchmarks/results/search/<task>-protocol.jsonl``, so a task that takes hours fills in
over several sittings; the table says how many of the registered runs it holds.

Reading a run: its compute is the CPU seconds of every job of its campaign
(:attr:`~benchmarks.search.protocol.RunResult.cpu_s`), and the final-tier target score of its
lineage head is a step function of compute (the baseline's until the first acceptance;
:attr:`~benchmarks.search.protocol.RunResult.final_by_cpu`). "At equal compute" reads both runs
of a seed at the smaller of their two totals.
"""

from __future__ import annotations

import math
import random
import statistics
import subprocess
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scipy import stats

from benchmarks import kept as kept_results
from benchmarks.bench_search import FIGURES, Plan, _reviews, run_task
from benchmarks.search.protocol import RunResult
from benchmarks.search.report import holm, mean_ci
from benchmarks.search.results import log_for
from rsilab.tasks import get_task

REGISTRATION = Path(__file__).parent / "registration" / "search-protocol.toml"
REGISTRATIONS = tuple(
    Path(__file__).parent / "registration" / name
    for name in (
        "search-protocol.toml",
        "kernel-protocol.toml",
        "kernel-protocol-2.toml",
        "synthetic-truth.toml",
    )
)
"""Every registration, in the order they were made: the first (synthetic, digits, textcls),
the second, made once the built-in policy searched code variants (kernel), the third (kernel
again, once the policy raced early when its search was exhausted), and the fourth (synthetic's
true quality and regret at 30 fresh seeds). Each freezes its own commit; a task's runs refuse
to start when ``src/`` differs from its registration's."""
ROOT = Path(__file__).resolve().parents[1]


class ProtocolError(RuntimeError):
    """The registration cannot be honoured (a changed ``src/``, a malformed file)."""


@dataclass(frozen=True)
class TaskPlan:
    name: str
    seeds: list[int]
    budget: int
    policies: list[str]
    truth: bool = False
    results: str = "protocol"
    """The table its runs are kept in (``<task>-<results>.jsonl``): a later registration of a
    task names its own, so the earlier registration's runs stay as they were."""

    @property
    def label(self) -> str:
        """The task as the table names it (with its table when that is not the first)."""
        return self.name if self.results == "protocol" else f"{self.name} ({self.results})"


@dataclass(frozen=True)
class Registration:
    frozen_commit: str
    policy: str
    peer: str
    level: float
    tasks: list[TaskPlan]


def load_registration(path: Path = REGISTRATION) -> Registration:
    """The registered protocol; ProtocolError when the file is malformed."""
    try:
        raw = tomllib.loads(path.read_text("utf-8"))
        return Registration(
            frozen_commit=str(raw["frozen_commit"]),
            policy=str(raw["primary"]["policy"]),
            peer=str(raw["primary"]["peer"]),
            level=float(raw["primary"]["level"]),
            tasks=[TaskPlan(**t) for t in raw["task"]],
        )
    except (OSError, KeyError, TypeError, tomllib.TOMLDecodeError) as exc:
        raise ProtocolError(f"{path}: not a readable registration ({exc})") from exc


def check_frozen(reg: Registration, root: Path = ROOT) -> None:
    """ProtocolError unless ``src/`` in ``root`` (tracked and untracked files) equals the
    frozen commit's."""
    diff = subprocess.run(
        ["git", "-C", str(root), "diff", "--quiet", reg.frozen_commit, "--", "src"],
        capture_output=True,
        text=True,
        check=False,
    )
    untracked = subprocess.run(
        ["git", "-C", str(root), "ls-files", "--others", "--exclude-standard", "src"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if diff.returncode != 0 or untracked:
        what = diff.stderr.strip() or ("changed files" if diff.returncode else "untracked files")
        raise ProtocolError(
            f"src/ differs from the registered commit {reg.frozen_commit[:10]} ({what}); run "
            f"the protocol from a worktree of it: git worktree add /tmp/protocol "
            f"{reg.frozen_commit}"
        )


# --- reading runs ----------------------------------------------------------------------------


def score_at(run: RunResult, cpu_s: float) -> float:
    """The final-tier target score of ``run``'s head once ``cpu_s`` of compute was spent."""
    score = run.final_by_cpu[0][1] if run.final_by_cpu else run.baseline_final
    for spent, value in run.final_by_cpu:
        if spent <= cpu_s:
            score = value
    return score


def at_equal_compute(mine: RunResult, other: RunResult) -> tuple[float, float]:
    """Both runs' scores at the smaller of their two compute totals (oriented by the caller)."""
    budget = min(mine.cpu_s, other.cpu_s)
    return score_at(mine, budget), score_at(other, budget)


@dataclass(frozen=True)
class Comparison:
    task: str
    policy: str
    diffs: list[float]
    """rsilab minus the policy per seed at equal compute, oriented so positive is better."""

    @property
    def p(self) -> float:
        """Two-sided paired t p-value (1.0 when every difference is zero or one seed)."""
        if len(self.diffs) < 2 or not any(self.diffs):
            return 1.0
        if statistics.pstdev(self.diffs) == 0.0:
            return 0.0
        return float(stats.ttest_1samp(self.diffs, 0.0).pvalue)


def compare(
    task: str, by_policy: Mapping[str, Sequence[RunResult]], mine: str, other: str, sign: float
) -> Comparison | None:
    """``mine`` against ``other`` paired by seed at equal compute (None: no seed in common)."""
    theirs = {r.seed: r for r in by_policy.get(other, [])}
    diffs = []
    for run in by_policy.get(mine, []):
        if run.seed in theirs:
            a, b = at_equal_compute(run, theirs[run.seed])
            diffs.append(sign * (a - b))
    return Comparison(task, other, diffs) if diffs else None


def _end_diffs(
    by_policy: Mapping[str, Sequence[RunResult]], mine: str, other: str, sign: float
) -> list[float]:
    """rsilab minus ``other`` on the final-tier score at the end of each run, paired by seed
    (not registered: reported beside the registered statistic, see :func:`run_protocol`)."""
    theirs = {r.seed: r for r in by_policy.get(other, [])}
    return [
        sign * (r.final - theirs[r.seed].final) for r in by_policy.get(mine, []) if r.seed in theirs
    ]


# --- synthetic's truth -------------------------------------------------------------------------


def feasible_optimum(samples: int = 200_000, seed: int = 0) -> float:
    """The best true quality found among ``samples`` random configs of synthetic's space whose
    true robustness stays within the tolerance (0.02) of the starting config's: the reference
    for regret (a lower bound of the true optimum, so regret is understated, never overstated)."""
    from rsilab.tasks.builtin.synthetic import true_score

    space = get_task("synthetic").search_space
    start = {k.name: k.default for k in space}
    floor = true_score(start, "base", "robustness") - 0.02
    rng = random.Random(seed)
    best = -math.inf
    for _ in range(samples):
        config = {
            "lr": 10 ** rng.uniform(-5.0, 0.0),
            "width": round(2 ** rng.uniform(2.0, 10.0)),
            "dropout": rng.uniform(0.0, 0.8),
            "epochs": rng.randint(1, 64),
            "optimizer": rng.choice(["sgd", "adam"]),
        }
        if true_score(config, "base", "robustness") >= floor:
            best = max(best, true_score(config, "base", "quality"))
    return best


# --- the table -----------------------------------------------------------------------------------


def rows_for(
    plan: TaskPlan, runs: Sequence[RunResult], reg: Registration, optimum: float | None
) -> tuple[list[dict[str, Any]], list[Comparison]]:
    """One row per policy of ``plan`` (without Holm's p, filled in by :func:`run`)."""
    task = get_task(plan.name)
    target = task.targets[0]
    sign = 1.0 if target.higher_is_better else -1.0
    by_policy: dict[str, list[RunResult]] = {}
    for r in runs:
        by_policy.setdefault(r.policy, []).append(r)
    rows, comparisons = [], []
    for policy in plan.policies:
        group = by_policy.get(policy, [])
        row: dict[str, Any] = {
            "task": plan.label,
            "policy": policy,
            "runs": f"{len(group)}/{len(plan.seeds)} x {plan.budget} exps",
        }
        if not group:
            rows.append(row | {"final (end) [95% CI]": "not run yet"})
            continue
        row["final (end) [95% CI]"] = str(mean_ci([r.final for r in group]))
        row["accepted"] = f"{sum(1 for r in group if r.accepted)}/{len(group)}"
        row["compute, CPU-s (mean)"] = f"{statistics.fmean(r.cpu_s for r in group):.0f}"
        row["reviews that changed the move / followed"] = _reviews(group)
        if policy == reg.policy:
            row["rsilab - policy at equal compute [95% CI]"] = "-"
            row["p (two-sided)"] = "-"
        else:
            found = compare(plan.label, by_policy, reg.policy, policy, sign)
            if found is None:
                row["rsilab - policy at equal compute [95% CI]"] = "no paired seeds yet"
            else:
                comparisons.append(found)
                row["rsilab - policy at equal compute [95% CI]"] = mean_ci(found.diffs).signed()
                wins = sum(d > 0 for d in found.diffs)
                losses = sum(d < 0 for d in found.diffs)
                row["W/T/L"] = f"{wins}/{len(found.diffs) - wins - losses}/{losses}"
                row["p (two-sided)"] = f"{found.p:.3f}"
                row["role"] = "primary" if policy == reg.peer else "secondary"
                ends = _end_diffs(by_policy, reg.policy, policy, sign)
                row["rsilab - policy at the end, post hoc [95% CI]"] = mean_ci(ends).signed()
        if plan.truth and optimum is not None:
            row.update(_truth(group, optimum))
        rows.append(row)
    return rows, comparisons


def _truth(group: Sequence[RunResult], optimum: float) -> dict[str, str]:
    from rsilab.tasks.builtin.synthetic import true_score

    quality = [true_score(r.head_config, "base", "quality") for r in group if r.head_config]
    if not quality:
        return {}
    return {
        "head's true quality": str(mean_ci(quality)),
        "regret vs best feasible found": f"{optimum - statistics.fmean(quality):.3f}",
    }


def plot(plan: TaskPlan, runs: Sequence[RunResult], target: str, figure: Path) -> None:
    """Mean final-tier score of the head against compute, one line per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not runs:
        return
    top = max(r.cpu_s for r in runs)
    grid = [top * i / 100 for i in range(101)]
    fig, ax = plt.subplots(figsize=(7, 4))
    for policy in plan.policies:
        group = [r for r in runs if r.policy == policy]
        if group:
            mean = [statistics.fmean(score_at(r, c) for r in group) for c in grid]
            ax.step(grid, mean, where="post", label=f"{policy} ({len(group)})")
    ax.set_xlabel("compute (job CPU seconds)")
    ax.set_ylabel(f"final-tier {target} of the head (mean)")
    ax.set_title(f"{plan.name}: final-tier score against compute")
    ax.legend(fontsize=7)
    fig.tight_layout()
    figure.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(figure, dpi=100)
    plt.close(fig)


def run_protocol(quick: bool) -> list[dict[str, Any]]:
    """The registered search protocol: rsilab against its peers at equal compute.

    The primary comparison is rsilab against optuna-tpe-raced on each task; the other policies
    are compared with Holm's adjustment. Registration:
    `benchmarks/registration/search-protocol.toml` (seeds, budgets, policies and
    the statistics, committed before the runs; its `frozen_commit` is the policy and controller
    under test, and a run refuses to start when `src/` differs from it). Every policy drives the
    same Experiment OS and Host Controller of one lab per task (`benchmarks.search.protocol`):
    the same baseline, seeds, budget of experiments and judge. *Compute*: CPU seconds of every
    job of the run's campaign from the job records (its experiments and re-runs, the
    controller's trainings and predicts for its proposals and their heads; the shared baseline
    evaluation is not counted). *final (end)*: final-tier target score of the lineage head at
    the end of the run (the accepted system, or the baseline). *rsilab - policy at equal
    compute*: per seed, both runs read at the smaller of their two compute totals (a version
    accepted after that point does not count), paired t interval; *p*: two-sided paired t;
    *Holm p*: Holm's step-down adjustment over every secondary comparison of every task (the
    primary comparison, rsilab vs optuna-tpe-raced, is not adjusted). optuna-tpe-raced is the
    built-in policy's own sampler code (constrained multivariate TPE fed every run), the same
    half-tolerance non-target margin, the same end race by successive halving and the same
    propose-once rule, without directions, Workers or the Reviewer; optuna-tpe and random
    propose their best feasible dev config once (see the search tables' notes). On synthetic
    the head's true quality is exact (`synth.py`) and regret is measured from the best feasible
    config of 200,000 random draws. *at the end, post hoc*: the same pairs on the final-tier
    score at the end of each run, whatever its compute; not registered, added after the first
    runs showed that the registered read is degenerate when both policies propose only at the
    end of their budgets (whichever used a little more CPU is read just before its own
    acceptance, at the baseline's score), so it is reported beside it and no verdict rests on
    it. Curves: `benchmarks/figures/protocol_<task>.png`. A quick run reads the kept runs only
    (it runs nothing). Only a task's registered seeds are run and read; the runner once ran
    every seed up to the largest registered one, so `synthetic-protocol-truth.jsonl` also holds
    seeds 1-10 of each of its policies, which stay in the file and no table reads. Tuning: the
    policy's defaults were tuned on the generated families of
    `tests/orchestrator/builtin/tuning_tasks.py` only.
    """
    registrations = [load_registration(path) for path in REGISTRATIONS]
    rows: list[dict[str, Any]] = []
    comparisons: list[Comparison] = []
    planned = [(reg, plan) for reg in registrations for plan in reg.tasks]
    optimum = feasible_optimum() if any(plan.truth for _, plan in planned) else None
    for reg, plan in planned:
        log = log_for(plan.name, plan.results)
        policies = tuple(plan.policies)
        kept = log.load(plan.budget, _split(plan.name))
        runs = [kept[(p, s)] for p in policies for s in plan.seeds if (p, s) in kept]
        if (
            not quick
            and not kept_results.RUN_NOTHING_NEW
            and len(runs) < len(policies) * len(plan.seeds)
        ):  # runs are left to do: only the registration's frozen code may make them
            check_frozen(reg)
            runs, _ = run_task(
                plan.name,
                Plan(seeds=len(plan.seeds), budget=plan.budget),
                policies,
                log=log,
                seeds=plan.seeds,
            )
        target = get_task(plan.name).targets[0].name
        figure = plan.name if plan.results == "protocol" else f"{plan.name}-{plan.results}"
        plot(plan, runs, target, FIGURES / f"protocol_{figure}.png")
        found_rows, found = rows_for(plan, runs, reg, optimum)
        rows += found_rows
        comparisons += found
    secondary = [c for c in comparisons if c.policy != registrations[0].peer]
    adjusted = dict(
        zip(((c.task, c.policy) for c in secondary), holm([c.p for c in secondary]), strict=True)
    )
    for row in rows:
        key = (row["task"], row["policy"])
        row["Holm p"] = f"{adjusted[key]:.3f}" if key in adjusted else "-"
    return rows


def _split(task: str) -> str:
    from benchmarks.search.protocol import split_id, split_secret

    return split_id(split_secret(task))
