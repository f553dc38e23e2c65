"""Post-training a language model: the base model, rsilab's accepted system and Optuna TPE.

Entry ``benchmarks.bench_posttrain:run_posttrain``. Five seeds of the ``posttrain`` task, each a
run of rsilab's built-in policy and one of Optuna's TPE over the recipe knobs (proposing its best
feasible dev config once), at the same budget of experiments, through the one proposal protocol
of :mod:`benchmarks.search.protocol` (one lab, one baseline, the same controller). Every finished
run is kept in ``benchmarks/results/search/posttrain-seeds.jsonl`` with every benchmark's
final-tier score of its head, so the table fills in over several sittings (a run took 4-41
minutes of wall time on 2 cores, two at a time) and a quick run reads only what is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks import kept as kept_results
from benchmarks.bench_search import Plan, run_task
from benchmarks.search.protocol import BUILTIN, RunResult, split_id, split_secret
from benchmarks.search.report import mean_ci
from benchmarks.search.results import log_for
from rsilab.tasks import get_task

TASK = "posttrain"
SEEDS = 5
BUDGET = 12
PEER = "optuna-tpe"
POLICIES = (BUILTIN, PEER)


def _ci(values: Sequence[float], sign: str = "") -> str:
    """Mean and 95% t interval of ``values`` ("-" for none); ``sign="+"`` signs a change."""
    if not values:
        return "-"
    found = mean_ci(values)
    if found.n < 2:
        return f"{found.mean:{sign}.3f} (n=1)"
    return f"{found.mean:{sign}.3f} [{found.low:{sign}.3f}, {found.high:{sign}.3f}]"


def rows_for(
    runs: Sequence[RunResult], benchmarks: Sequence[tuple[str, bool]]
) -> list[dict[str, Any]]:
    """One row per benchmark (target first): base, each policy's head and its change from the
    base across seeds (mean and 95% t interval), and rsilab minus the peer paired by seed."""
    by_policy = {p: [r for r in runs if r.policy == p and r.final_scores] for p in POLICIES}
    rows = []
    for name, target in benchmarks:
        base = next((r.baseline_scores[name] for r in runs if name in r.baseline_scores), None)
        row: dict[str, Any] = {
            "benchmark": f"{name} (target)" if target else name,
            "base": "-" if base is None else f"{base:.3f}",
        }
        for policy in POLICIES:
            group = by_policy[policy]
            row[policy] = _ci([r.final_scores[name] for r in group])
            row[f"{policy} - base"] = _ci(
                [r.final_scores[name] - r.baseline_scores[name] for r in group], "+"
            )
        mine = {r.seed: r.final_scores[name] for r in by_policy[BUILTIN]}
        theirs = {r.seed: r.final_scores[name] for r in by_policy[PEER]}
        row[f"rsilab - {PEER}"] = _ci(
            [mine[s] - theirs[s] for s in sorted(mine.keys() & theirs.keys())], "+"
        )
        rows.append(row)
    for policy in POLICIES:
        group = by_policy[policy]
        accepted = sum(1 for r in group if r.accepted)
        cpu = mean_ci([r.cpu_s for r in group]).mean if group else 0.0
        rows.append(
            {
                "benchmark": f"{policy}: seeds with a version accepted",
                "base": "-",
                BUILTIN: f"{accepted} of {len(group)} runs" if policy == BUILTIN else "",
                PEER: f"{accepted} of {len(group)} runs" if policy == PEER else "",
                f"{BUILTIN} - base": f"{cpu:.0f} job CPU s per run" if policy == BUILTIN else "",
                f"{PEER} - base": f"{cpu:.0f} job CPU s per run" if policy == PEER else "",
                f"rsilab - {PEER}": "",
            }
        )
    return rows


def run_posttrain(quick: bool) -> list[dict[str, Any]]:
    """Post-training (posttrain): base model, rsilab's accepted system and Optuna TPE per benchmark.

    Five seeds planned of the ``posttrain`` task (the *seeds with a version accepted* rows say
    how many each policy holds), 12 experiments each, rsilab's built-in policy against Optuna's
    TPE over the recipe knobs (it proposes its best feasible dev config once), both judged by
    the same controller against the same baseline in one lab. Cells are the final-tier score of
    the run's lineage head (the accepted system, or the base when nothing was accepted): mean
    over the seeds held with its 95% t interval; *- base*: the change from the base model per
    seed (a regression on a non-target shows as a negative change); *rsilab - optuna-tpe*:
    paired by seed, the column to compare the policies by (where one policy holds seeds the
    other does not, their own means are over different seeds). The runs are kept
    (``benchmarks/results/search/posttrain-seeds.jsonl``); a quick run runs nothing and reads
    them. The built-in policy was not tuned on this task: where a run here showed a defect, the
    change was measured on generated tuning families (seeds 61-100 of the recipe family,
    ``tests/orchestrator/builtin/tuning_recipe.py``, and of the constrained family,
    ``tests/orchestrator/builtin/tuning_tasks.py``; docs/posttrain.md says what each change
    did there), and rsilab's runs from before a change are kept apart (optuna-tpe's runs stay:
    its search did not change). Runs of earlier commits are kept
    apart: before the harness answered multiple choice by likelihood (a different baseline) in
    ``posttrain-seeds-choice-by-letter*.jsonl``, and those of an earlier harness or policy in
    ``posttrain-seeds-<commit>.jsonl``.
    """
    task = get_task(TASK)
    log = log_for(TASK, "seeds")
    plan = Plan(seeds=SEEDS, budget=BUDGET, ablations=False)
    if quick or kept_results.RUN_NOTHING_NEW:
        kept = log.load(BUDGET, split_id(split_secret(TASK)))
        runs = [kept[(p, s)] for p in POLICIES for s in range(1, SEEDS + 1) if (p, s) in kept]
    else:
        runs, _ = run_task(TASK, plan, POLICIES, log=log)
    benchmarks = sorted(((b.name, b.target) for b in task.benchmarks), key=lambda b: not b[1])
    return rows_for(runs, benchmarks)


def run_posttrain_attacks(quick: bool) -> list[dict[str, Any]]:
    """Post-training (posttrain): contamination attacks on SFT data, and honest data beside them.

    Each row is one dataset registered through ``add_data`` in a posttrain campaign (lab secret
    fixed), then scanned by the content guard and put to the controller's training guards as
    the data of a candidate, before any job would run (``benchmarks/hacking/posttrain.py``,
    also what ``tests/tasks/test_posttrain_contamination.py`` asserts on). *Honest*: the train
    tier as Q/A lines, prose and JSONL; 3,000 fresh items per generated benchmark (arith,
    fncall, code) drawn on the train bucket; the shipped corpus (it states every entity's
    facts, private ones too: public knowledge by design). *Attacks*: 1, 10 and 50 private items
    hidden among the train tier's Q/A lines, with their numbers changed (arith, fncall: found by
    their private entities), copied (facts, choice, code: found by their text), or with their
    names changed to train-bucket ones (arith, fncall). *planted items found*: planted items the
    content guard names; *content hits*: every hit; *name-changed neighbours private*: among
    items equal to a tier item but for its entity, how many match private ones, with the
    binomial P of that many by the chance rate the generators give (one secret); the guard
    refuses below P = 1e-4. What is not caught is in the rows, stated as measured. The same in
    a quick run.
    """
    import tempfile
    from pathlib import Path

    from benchmarks.hacking.posttrain import attack_rows

    with tempfile.TemporaryDirectory(prefix="rsilab-bench-posttrain-attacks-") as tmp:
        return attack_rows(Path(tmp))
