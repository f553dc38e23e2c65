"""Research teams: independent researchers vs shared memory vs shared memory + orientations.

Three built-in teams of three researchers (``rsilab run --team 3``) with the same total
experiment budget and seeds (:data:`~benchmarks.search.protocol.TEAM_MODES`):

- *independent*: each researcher sees only its own runs and findings (and the reference's)
  and is led as a team of one, so it alternates between the behaviours on its own records;
- *shared memory*: the same researchers, each led alone, but they see the team's runs and
  follow every supported finding;
- *memory + orientations*: the full team; the Leader orients each researcher (explorer,
  exploiter, analyst, verifier) and redirects it from the records.

Each run gets a fresh lab (its data split fixed per task, as the search tables'), so no run
reads another's findings or starts from another's campaign review. The finished runs are kept
in ``benchmarks/results/search/<task>-teams.jsonl`` and a later run does only the missing ones.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmarks import current_commit
from benchmarks import kept as kept_results
from benchmarks.bench_search import Plan
from benchmarks.search.protocol import (
    TEAM_MODES,
    RunResult,
    run_team,
    split_id,
    split_secret,
    task_lab,
)
from benchmarks.search.report import mean_ci, paired
from benchmarks.search.results import RunLog, log_for
from rsilab.tasks import get_task

PLANS: dict[str, Plan] = {
    "synthetic": Plan(seeds=10, budget=30, ablations=False),
    "policy": Plan(seeds=5, budget=24, ablations=False),
}
"""Full runs only: three researchers need a budget a quick run cannot give them. On policy
each experiment runs the built-in policy on generated task families (about 3 s); digits and
textcls cost too much per experiment for three teams of ten seeds here."""
BASE = "team: independent"
PARALLEL = 2
"""Team runs at once (each in its own lab; a team runs up to two experiments at a time)."""


def team_runs(task: str, plan: Plan, log: RunLog | None) -> list[RunResult]:
    """Every (mode, seed) run of the plan: kept ones read back, the others run now."""
    split = split_id(split_secret(task))
    done = log.load(plan.budget, split) if log is not None else {}
    todo = [
        (mode, seed)
        for seed in range(1, plan.seeds + 1)
        for mode in TEAM_MODES
        if (mode, seed) not in done
    ]
    if kept_results.RUN_NOTHING_NEW:
        todo = []
    commit = current_commit()

    def one(job: tuple[str, int]) -> RunResult:
        mode, seed = job
        with task_lab(get_task(task), secret=split_secret(task)) as tl:
            result = run_team(tl, seed, plan.budget, mode)
        result.commit, result.split = commit, split
        if log is not None:
            log.append(result)
        return result

    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        fresh = list(pool.map(one, todo))
    runs = [*done.values(), *fresh]
    order = {m: i for i, m in enumerate(TEAM_MODES)}
    return sorted(runs, key=lambda r: (order.get(r.policy, len(order)), r.seed))


def team_rows(task: str, runs: list[RunResult], plan: Plan) -> list[dict[str, Any]]:
    """One row per mode: final-tier score, accepted runs, best dev, and the paired change
    against independent researchers."""
    target = get_task(task).targets[0].name
    base = {r.seed: r.final for r in runs if r.policy == BASE}
    rows = []
    for mode in TEAM_MODES:
        group = [r for r in runs if r.policy == mode]
        if not group:
            continue
        compared = paired({r.seed: r.final for r in group}, base) if mode != BASE else None
        bests = [r.best_dev for r in group if r.best_dev is not None]
        rows.append(
            {
                "task": task,
                "target": target,
                "team of 3": mode.removeprefix("team: "),
                "seeds x budget": f"{len(group)} x {plan.budget}"
                + (f" (partial: {plan.seeds} planned)" if len(group) < plan.seeds else ""),
                "final target [95% CI]": str(mean_ci([r.final for r in group])),
                "runs accepted": f"{sum(1 for r in group if r.accepted)}/{len(group)}",
                "best feasible dev target": f"{mean_ci(bests).mean:.3f}" if bests else "-",
                "mode - independent [95% CI]": "-" if compared is None else compared.diff.signed(),
                "W/T/L (sign p)": "-"
                if compared is None
                else f"{compared.wins}/{compared.ties}/{compared.losses} ({compared.sign_p:.2f})",
                "s per run": round(sum(r.seconds for r in group) / len(group), 1),
                "measured at": ", ".join(sorted({r.commit or "-" for r in group})),
            }
        )
    return rows


def run_team_comparison(quick: bool) -> list[dict[str, Any]]:
    """Teams: independent researchers vs shared memory vs shared memory + orientations

    Three researchers, one campaign, the same total experiment budget and seeds, the built-in
    policy (`run_team_campaign`); a fresh lab per run with the task's fixed split, the
    baseline H0/M0 evaluated in each (6 controller seeds; identical across labs). *final* is
    the final-tier target score of the lineage head at the end (the baseline when nothing was
    accepted); *mode - independent* pairs runs by seed (t interval, wins/ties/losses, sign
    test). Independent researchers share nothing but the controller's decisions and, at the
    budget's end, the team's one last proposal of its best unproposed run. Full runs only.
    """
    del quick  # full-only (see benchmarks.__main__.FULL_ONLY)
    rows: list[dict[str, Any]] = []
    for task, plan in PLANS.items():
        runs = team_runs(task, plan, log_for(task, "teams"))
        rows += team_rows(task, runs, plan) or [{"task": task, "team of 3": "no kept runs yet"}]
    return rows
