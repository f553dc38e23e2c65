"""Records of the agents' jobs: their view, dev evaluations, experiment sync, comparisons.

Functions over the store; what they compute is written through the controller's
:class:`~rsilab.controller.jobs.JobRecorder` (:meth:`Caller.recorder`), never committed here.
The job tools and the background work of ``run_job`` share them, so an experiment's resources,
logs and controller metrics are computed in one place: :func:`synced`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rsilab.controller.jobs import CONTROLLER_ACTOR, JobRecorder
from rsilab.errors import ConflictError, ToolError
from rsilab.records import (
    DataTier,
    Evaluation,
    Experiment,
    ExperimentState,
    Job,
    JobStatus,
    Metric,
    MetricSource,
    Resources,
    Role,
    SampleScore,
)
from rsilab.stats import avg_at_k, paired_gain
from rsilab.store.base import Store
from rsilab.tasks import (
    Benchmark,
    HarnessOutputError,
    Sample,
    Scored,
    get_scorer,
    parse_predictions,
    score_outputs,
)

SYNC_ATTEMPTS = 5
"""How often an experiment's sync is retried when another writer got there first."""
LARGEST = 10
"""How many of the most different samples a comparison lists."""

DevTiers = tuple[tuple[Benchmark, tuple[Sample, ...]], ...]
"""Each benchmark with the samples predict sees (its dev tier, or a held-out fold), in order."""
ScoredTiers = tuple[tuple[Benchmark, tuple[Scored, ...]], ...]
"""Each benchmark with its samples' scores, in the same order."""


@dataclass(frozen=True)
class Caller:
    """Who asked for the work: the actor and role its ledger events carry."""

    actor: str
    role: Role

    def recorder(self, store: Store) -> JobRecorder:
        """The writer of what this caller's jobs produce, into ``store``."""
        return JobRecorder(store, self.actor, self.role)


def job_view(job: Job) -> dict[str, Any]:
    """What the tools show of a job (workspace-relative model path, no host paths)."""
    made = job.status is JobStatus.SUCCEEDED and job.model_out_sha256 is not None
    return {
        "job_id": job.id,
        "kind": str(job.kind),
        "status": str(job.status),
        "experiment_id": job.experiment_id,
        "seed": job.inputs.seed,
        "created_at": job.created_at,
        "finished_at": job.finished_at,
        "resources": {
            "cpu_s": job.resources.cpu_s,
            "wall_s": job.resources.wall_s,
            "peak_rss_mb": job.resources.peak_rss_mb,
        },
        "model": job.model_out if made else None,
        "model_sha256": job.model_out_sha256,
        "exit_code": job.exit_code,
        "kill_reason": job.kill_reason,
        "error": job.error,
    }


# --- dev and fold scores -----------------------------------------------------------------


def tier_evaluations(store: Store, experiment_id: str, tier: DataTier) -> list[Evaluation]:
    """Every evaluation of an experiment on ``tier``, oldest first (train: fold scores)."""
    return store.query_as(Evaluation, fields={"subject_id": experiment_id, "tier": tier.value})


def dev_evaluations(store: Store, experiment_id: str) -> list[Evaluation]:
    """Every dev evaluation of an experiment, oldest first."""
    return tier_evaluations(store, experiment_id, DataTier.DEV)


def fold_evaluations(store: Store, experiment_id: str) -> list[Evaluation]:
    """Every fold evaluation (scores on the train tier, out of fold) of an experiment."""
    return tier_evaluations(store, experiment_id, DataTier.TRAIN)


def score_tiers(tiers: DevTiers, stdout: bytes) -> ScoredTiers:
    """Score predict's ``stdout``, which answers the samples of ``tiers`` in order.

    Raises:
        HarnessOutputError: predict broke the output contract.
    """
    outputs = parse_predictions(stdout, [s.id for _, tier in tiers for s in tier])
    return tuple(
        (bench, tuple(score_outputs(bench.scorer, tier, outputs))) for bench, tier in tiers
    )


def score_dev(
    store: Store, caller: Caller, dev: DevTiers, done: Job, stdout: bytes
) -> dict[str, Any]:
    """Score predict's output per benchmark and record one dev Evaluation for each.

    ``stdout`` answers the dev samples of ``dev`` in order. A broken output contract, or
    scores that cannot be stored, come back as ``error`` text: the job's fault, not the call's.
    """
    try:
        scored = score_tiers(dev, stdout)
    except HarnessOutputError as exc:
        return {"error": f"predict broke the output contract: {exc}", "scores": {}}
    assert done.experiment_id is not None
    subject = Subject(done.campaign_id, done.experiment_id, done.inputs.seed)
    return record_scores(store, caller, subject, DataTier.DEV, scored, f"job {done.id}")


@dataclass(frozen=True)
class Subject:
    """What scores are recorded for: an experiment of a campaign, at one seed."""

    campaign_id: str | None
    experiment_id: str
    seed: int


def record_scores(
    store: Store,
    caller: Caller,
    subject: Subject,
    tier: DataTier,
    scored: ScoredTiers,
    detail: str,
) -> dict[str, Any]:
    """Record one Evaluation of ``subject`` on ``tier`` per benchmark of ``scored``.

    Each is the experiment's next epoch on that benchmark and tier. A benchmark with scores
    that cannot be stored (not finite) gets no evaluation and is named in ``error``. Returns
    ``scores`` (mean per benchmark), ``samples`` (how many), ``evaluation_ids`` and
    ``invalid_outputs``.
    """
    previous = tier_evaluations(store, subject.experiment_id, tier)
    evaluations: list[Evaluation] = []
    invalid: dict[str, int] = {}
    problems: list[str] = []
    for bench, results in scored:
        invalid[bench.name] = sum(1 for s in results if not s.valid)
        if not all(math.isfinite(s.score) for s in results):
            problems.append(f"{bench.name}: {invalid[bench.name]} outputs could not be scored")
            continue
        epoch = sum(1 for e in previous if e.benchmark == bench.name)
        values = [s.score for s in results]
        evaluations.append(
            Evaluation(
                campaign_id=subject.campaign_id,
                benchmark=bench.name,
                tier=tier,
                subject_id=subject.experiment_id,
                metric=bench.scorer,
                samples=[
                    SampleScore(
                        sample_id=s.sample_id, epoch=epoch, seed=subject.seed, score=s.score
                    )
                    for s in results
                ],
                aggregates={"avg@1": avg_at_k([values])} if len(values) >= 2 else {},
                evaluator=CONTROLLER_ACTOR,
            )
        )
    if evaluations:
        caller.recorder(store).evaluated(evaluations, detail)
    out: dict[str, Any] = {
        "scores": {e.benchmark: mean_score(e) for e in evaluations},
        "samples": {e.benchmark: len(e.samples) for e in evaluations},
        "evaluation_ids": {e.benchmark: e.id for e in evaluations},
        "invalid_outputs": invalid,
    }
    if problems:
        out["error"] = "; ".join(problems)
    return out


def mean_score(evaluation: Evaluation) -> float:
    """Mean of an evaluation's sample scores (0.0 when it has none)."""
    scores = [s.score for s in evaluation.samples]
    return sum(scores) / len(scores) if scores else 0.0


def latest_means(evaluations: Sequence[Evaluation]) -> dict[str, Any]:
    """The newest of ``evaluations`` (oldest first) per benchmark: its mean, id and time."""
    return {
        e.benchmark: {"mean": mean_score(e), "evaluation_id": e.id, "at": e.created_at}
        for e in evaluations
    }


def _epoch(evaluation: Evaluation) -> int:
    return max((s.epoch for s in evaluation.samples), default=0)


# --- experiment sync ----------------------------------------------------------------------


def experiment_jobs(store: Store, experiment_id: str) -> list[Job]:
    """The agents' jobs of an experiment, oldest first (the controller's are never listed)."""
    jobs = store.query_as(Job, fields={"experiment_id": experiment_id})
    return [j for j in jobs if not j.kind.is_private]


def synced(store: Store, exp: Experiment) -> Experiment:
    """``exp`` brought up to date with its finished jobs and its dev and fold evaluations.

    Recomputed from the records each time, so applying it twice changes nothing: resources
    are the sums over finished jobs (peak memory: the largest), log blobs are added once in
    job order, and the controller's metrics are one per evaluation (split ``dev`` for a dev
    evaluation, ``train`` for a fold evaluation's out-of-fold mean), replacing earlier ones;
    agent-reported metrics are kept. Metrics are ordered by time.
    """
    jobs = experiment_jobs(store, exp.id)
    finished = [j for j in jobs if j.is_finished()]
    used = total([j.resources for j in finished])
    resources = exp.resources.model_copy(
        update=used.model_dump(include={"cpu_s", "wall_s", "peak_rss_mb", "gpu_s", "gpu_memory_mb"})
    )
    logs = list(exp.log_artifacts)
    for job in finished:
        for sha in (job.stdout_sha256, job.stderr_sha256):
            if sha is not None and sha not in logs:
                logs.append(sha)
    controller = [
        Metric(
            name=e.benchmark,
            value=mean_score(e),
            split="dev" if e.tier is DataTier.DEV else "train",
            step=_epoch(e),
            source=MetricSource.CONTROLLER,
            at=e.created_at,
        )
        for e in [*dev_evaluations(store, exp.id), *fold_evaluations(store, exp.id)]
    ]
    kept = [m for m in exp.metrics if m.source is not MetricSource.CONTROLLER]
    state = exp.state
    if state is ExperimentState.CREATED and jobs:
        state = ExperimentState.RUNNING
    return exp.model_copy(
        update={
            "resources": resources,
            "log_artifacts": logs,
            "metrics": sorted([*kept, *controller], key=lambda m: m.at),
            "state": state,
        }
    )


def sync_experiment(store: Store, experiment_id: str, caller: Caller) -> Experiment:
    """Record :func:`synced` for one experiment unless it is finished or already current.

    Retried when another writer updated the experiment meanwhile (the result is recomputed
    from the records, so a retry loses nothing). Returns the experiment as stored.
    """
    for _ in range(SYNC_ATTEMPTS):
        exp = store.get_as(experiment_id, Experiment)
        if exp.is_finished():
            return exp
        update = synced(store, exp)
        if update == exp:
            return exp
        try:
            return caller.recorder(store).experiment_synced(update)
        except ConflictError:
            continue
    return store.get_as(experiment_id, Experiment)


def total(resources: Sequence[Resources]) -> Resources:
    """Resources summed (peak memories: the largest); the GPU fields stay None unless some
    job measured them."""
    gpu_s = [r.gpu_s for r in resources if r.gpu_s is not None]
    gpu_mb = [r.gpu_memory_mb for r in resources if r.gpu_memory_mb is not None]
    return Resources(
        cpu_s=sum(r.cpu_s for r in resources),
        wall_s=sum(r.wall_s for r in resources),
        peak_rss_mb=max((r.peak_rss_mb for r in resources), default=0.0),
        gpu_s=sum(gpu_s) if gpu_s else None,
        gpu_memory_mb=max(gpu_mb) if gpu_mb else None,
    )


# --- comparisons --------------------------------------------------------------------------


def _rows(evaluations: list[Evaluation]) -> list[dict[str, float]]:
    """One row per (evaluation, epoch): sample id -> score."""
    rows: dict[tuple[str, int], dict[str, float]] = {}
    for evaluation in evaluations:
        for s in evaluation.samples:
            rows.setdefault((evaluation.id, s.epoch), {})[s.sample_id] = s.score
    return list(rows.values())


def compare(
    name: str,
    evals_a: list[Evaluation],
    evals_b: list[Evaluation],
    higher_is_better: bool | None = None,
) -> dict[str, Any]:
    """Paired per-sample comparison of two experiments' evaluations on one benchmark and tier
    (dev scores, or the train tier's out-of-fold scores).

    ``higher_is_better`` is the benchmark's direction as its task declares it; None (a caller
    without the task) falls back on the scorer's default for the metric, else unknown.

    Rows are (evaluation, epoch) pairs; columns the samples every row of both scored. Raises
    ToolError when fewer than two samples are shared (no interval can be made).
    """
    rows_a, rows_b = _rows(evals_a), _rows(evals_b)
    shared = set.intersection(*(set(r) for r in rows_a + rows_b))
    ids = sorted(shared)
    if len(ids) < 2:
        raise ToolError("tool_failed", f"{name}: fewer than two samples scored in every row")
    a = np.array([[r[i] for i in ids] for r in rows_a])
    b = np.array([[r[i] for i in ids] for r in rows_b])
    gain = paired_gain(a, b, 0.95)
    mean_a, mean_b = a.mean(axis=0), b.mean(axis=0)
    diff = mean_a - mean_b
    order = sorted(range(len(ids)), key=lambda i: (-abs(float(diff[i])), ids[i]))[:LARGEST]
    metric = evals_a[-1].metric
    if higher_is_better is None:
        try:
            higher_is_better = get_scorer(metric).higher_is_better
        except KeyError:
            higher_is_better = None
    out: dict[str, Any] = {
        "benchmark": name,
        "metric": metric,
        "higher_is_better": higher_is_better,
        "samples": len(ids),
        "rows_a": len(rows_a),
        "rows_b": len(rows_b),
        "mean_a": float(a.mean()),
        "mean_b": float(b.mean()),
        "difference": {"mean": gain.value, "low": gain.low, "high": gain.high, "level": gain.level},
        "a_higher": int((diff > 0).sum()),
        "b_higher": int((diff < 0).sum()),
        "equal": int((diff == 0).sum()),
        "largest_differences": [
            {"sample_id": ids[i], "a": float(mean_a[i]), "b": float(mean_b[i])} for i in order
        ],
    }
    if len(rows_a) < 2 or len(rows_b) < 2:
        what, fix = (
            ("dev", "dev-evaluate models of more seeds")
            if evals_a[-1].tier is DataTier.DEV
            else ("fold", "run fold_eval with more seeds")
        )
        out["note"] = (
            f"an experiment with one {what} evaluation has no measured seed spread; the "
            f"interval holds sample noise only and is too narrow: {fix}"
        )
    return out
