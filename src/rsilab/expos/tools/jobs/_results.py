"""What the agents' jobs found: ``state_sync_results`` brings an experiment up to date with
them, ``compare_eval_samples`` pairs two experiments' per-sample scores."""

from __future__ import annotations

from typing import Any, Literal

from rsilab.errors import ToolError
from rsilab.expos.context import ToolEnv
from rsilab.expos.guards import GuardRefusal
from rsilab.expos.registry import Category
from rsilab.expos.tools._base import Name, RecordId, require, tool
from rsilab.expos.tools.jobs import _args as args
from rsilab.expos.tools.jobs import _records as jobrec
from rsilab.records import DataTier, Evaluation, Experiment


@tool(Category.EXECUTION)
def state_sync_results(env: ToolEnv, experiment_id: RecordId) -> dict[str, Any]:
    """Bring an experiment's record up to date with its finished jobs; list its jobs and its
    latest dev and fold scores. Safe to call any number of times.

    Resources are summed over its finished jobs, their log blobs are added to its log
    artifacts, and each dev evaluation gives one controller-sourced dev metric (each fold
    evaluation one with split 'train').

    Args:
        experiment_id: an experiment of this campaign (a finished one is listed, not changed).
    """
    campaign = env.campaign()
    exp = env.read(experiment_id, Experiment, field_name="experiment_id")
    update = jobrec.synced(env.store, exp)
    changed = update != exp and not exp.is_finished() and not campaign.is_finished()
    if changed:
        env.stage(update)
    shown = update if changed else exp
    return {
        "experiment_id": exp.id,
        "state": str(shown.state),
        "updated": changed,
        "jobs": [
            {"job_id": j.id, "kind": str(j.kind), "status": str(j.status)}
            for j in jobrec.experiment_jobs(env.store, exp.id)
        ],
        "dev_scores": jobrec.latest_means(jobrec.dev_evaluations(env.store, exp.id)),
        "fold_scores": jobrec.latest_means(jobrec.fold_evaluations(env.store, exp.id)),
        "resources": shown.resources.model_dump(mode="json"),
        "log_artifacts": len(shown.log_artifacts),
    }


@tool(Category.EXECUTION)
def compare_eval_samples(
    env: ToolEnv,
    experiment_a: RecordId,
    experiment_b: RecordId,
    benchmark: Name | None = None,
    tier: Literal["dev", "train"] = "dev",
) -> dict[str, Any]:
    """Compare two experiments' per-sample scores, paired by sample id.

    For each benchmark both were evaluated on: the paired difference a - b with its 95%
    interval (rows are the experiments' evaluations), how many samples each wins, and the
    samples that differ most. tier 'dev' compares dev scores (only in settings that return
    them); tier 'train' compares the out-of-fold train-tier scores of run_job fold_eval (every
    setting; fold-evaluate both with the same seeds so their folds match).

    Args:
        experiment_a: the experiment compared (a).
        experiment_b: the one it is compared with (b).
        benchmark: only this benchmark (default: every one both have).
        tier: 'dev' (dev evaluations) or 'train' (fold evaluations).
    """
    services = env.services()
    task = services.task_of(env.campaign())
    if tier == "dev":
        args.require_dev_feedback(task)
    scored = DataTier(tier)
    a = env.read(experiment_a, Experiment, field_name="experiment_a")
    b = env.read(experiment_b, Experiment, field_name="experiment_b")
    evals_a = _readable_evaluations(env, a.id, scored, "experiment_a")
    evals_b = _readable_evaluations(env, b.id, scored, "experiment_b")
    what = _EVALUATED[scored]
    names = sorted({e.benchmark for e in evals_a} & {e.benchmark for e in evals_b})
    if benchmark is not None:
        require(
            benchmark in names,
            "not_found",
            f"both experiments need a {what} evaluation on {benchmark!r}; they share: "
            f"{', '.join(names) or 'none'}",
            "benchmark",
        )
        names = [benchmark]
    require(bool(names), "not_found", f"the experiments share no {what}-evaluated benchmark")
    return {
        "experiment_a": a.id,
        "experiment_b": b.id,
        "tier": tier,
        "benchmarks": [
            jobrec.compare(
                name,
                [e for e in evals_a if e.benchmark == name],
                [e for e in evals_b if e.benchmark == name],
                higher_is_better=task.benchmark(name).higher_is_better,
            )
            for name in names
        ],
    }


_EVALUATED = {DataTier.DEV: "dev", DataTier.TRAIN: "fold"}
"""How the tools name the evaluations of each tier an agent can have scored."""


def _readable_evaluations(
    env: ToolEnv, experiment_id: str, tier: DataTier, field: str
) -> list[Evaluation]:
    found = [
        e for e in jobrec.tier_evaluations(env.store, experiment_id, tier) if _readable(env, e)
    ]
    if not found:
        what = _EVALUATED[tier]
        raise ToolError(
            "not_found",
            f"experiment {experiment_id} has no {what} evaluation yet; run run_job with "
            f"kind='{what}_eval' on it first",
            field=field,
        )
    return found


def _readable(env: ToolEnv, record: Evaluation) -> bool:
    try:
        env.check_readable(record)
    except GuardRefusal:
        return False
    return True
