"""One experiment's run in the dashboard's synthetic lab: its jobs, dev evaluations and end.

:func:`run_experiment` records what a Worker's experiment leaves once its jobs ran: a train job and
a dev-eval job (nothing is executed; the model's quality comes from the writer's
:meth:`~benchmarks._dashboard_writer._Writer.train`), one dev evaluation per benchmark, and
the experiment as ``finish_experiment`` leaves it. A few experiments are cancelled or their
train job fails, with the stderr a broken ``config.json`` leaves. :func:`flag` records a
worker's call that a guard refused, with its protocol flag.
"""

from __future__ import annotations

import hashlib
from typing import Any

from benchmarks._dashboard_writer import _Writer
from rsilab.expos.guards import GuardRefusal
from rsilab.records import (
    DataTier,
    Evaluation,
    Experiment,
    ExperimentState,
    FlagStage,
    Job,
    JobInputs,
    JobKind,
    JobStatus,
    Metric,
    MetricSource,
    ProtocolFlag,
    Record,
    Resources,
    Role,
    new_id,
    utc_now,
)

FAILED, CANCELLED, FLAGGED = 0.05, 0.015, 0.005
"""Shares of experiments whose train job fails, that are cancelled, that draw a flag."""
FLAGS = (
    (FlagStage.ACCESS, "path_outside_workspace", "read_file", "path '../../final.jsonl'"),
    (FlagStage.ACCESS, "tool_not_allowed_for_role", "update_direction", "a Main agent's tool"),
    (FlagStage.TRAINING, "unrecorded_weights", "run_job", "a model no recorded job made"),
)
"""Refusals a worker draws: (stage, rule, tool, what it tried)."""
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/workspace/train.py", line 20, in main\n'
    "    config = json.loads(Path(args.config).read_text())\n"
    "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)\n"
)
"""What a failed train job left on stderr (the worker's edit broke config.json)."""
DATA_SHA256 = {n: hashlib.sha256(n.encode()).hexdigest() for n in ("dev.jsonl", "train.jsonl")}
"""Fingerprints of a train job's data folder (fingerprints only: no blob is promised)."""


def run_experiment(
    w: _Writer, exp: Experiment, config: dict[str, Any]
) -> tuple[list[Record], Experiment, dict[str, float] | None]:
    """The train and dev-eval jobs of ``exp`` (whose config is ``config``) with its dev
    evaluations, ``exp`` as ``sync_experiment`` and then ``finish_experiment`` leave it, and
    its dev avg@1 per benchmark (None when it has no dev evaluation)."""
    roll = w.rng.random()
    if roll < CANCELLED:
        return [], _finish(exp, ExperimentState.CANCELLED, [], [], "cancelled", {}), None
    seed, workspace = int(w.rng.integers(1, 1000)), str(exp.workspace_hash)
    (model,), quality = w.train(config, 1)
    train_id, dev_id = new_id(Job.PREFIX), new_id(Job.PREFIX)
    out = f"runs/{train_id}/model.json"
    argv = f"python train.py --data data-in --model-out {out} --seed {seed} --config config.json"
    inputs = JobInputs(
        workspace_sha256=workspace,
        data_sha256=DATA_SHA256,
        config="config.json",
        seed=seed,
        argv=argv.split(),
    )
    train = w.job(
        JobKind.TRAIN,
        inputs,
        exp.created_by,
        id=train_id,
        experiment_id=exp.id,
        model_out=out,
        model_out_sha256=model,
    )
    if roll < CANCELLED + FAILED:
        error = f"exited with 1; stderr ends: {TRACEBACK[-60:]}"
        train = train.model_copy(
            update={
                "status": JobStatus.FAILED,
                "exit_code": 1,
                "model_out": None,
                "model_out_sha256": None,
                "stderr_sha256": w.put(TRACEBACK.encode()),
                "error": error,
            }
        )
        failed = _finish(exp, ExperimentState.FAILED, [train], [], "train failed", {})
        return [train], failed, None
    argv = f"python predict.py --model runs/{dev_id}/model-in.json --seed {seed}"
    inputs = JobInputs(
        workspace_sha256=workspace, model_in_sha256=model, seed=seed, argv=argv.split()
    )
    stdout = w.predict(model, quality)
    dev = w.job(
        JobKind.DEV_EVAL,
        inputs,
        exp.created_by,
        id=dev_id,
        experiment_id=exp.id,
        stdout_sha256=stdout,
    )
    evals = [
        w.evaluation(exp.id, (b, DataTier.DEV), w.scores((b, DataTier.DEV), q), [seed], True)
        for b, q in quality.items()
    ]
    scores = {e.benchmark: e.aggregates["avg@1"].value for e in evals}
    summary = f"dev quality {scores['quality']:.2f}"
    done = _finish(exp, ExperimentState.SUCCEEDED, [train, dev], evals, summary, scores)
    return [train, dev, *evals], done, scores


def _finish(
    exp: Experiment,
    state: ExperimentState,
    jobs: list[Job],
    evals: list[Evaluation],
    summary: str,
    scores: dict[str, float],
) -> Experiment:
    logs = [s for j in jobs for s in (j.stdout_sha256, j.stderr_sha256) if s is not None]
    metrics = [
        Metric(
            name=e.benchmark,
            value=scores[e.benchmark],
            step=0,
            source=MetricSource.CONTROLLER,
            at=e.created_at,
        )
        for e in evals
    ]
    used = Resources(
        cpu_s=sum(j.resources.cpu_s for j in jobs),
        wall_s=sum(j.resources.wall_s for j in jobs),
        peak_rss_mb=max((j.resources.peak_rss_mb for j in jobs), default=0.0),
    )
    update = {
        "state": state,
        "metrics": metrics,
        "log_artifacts": list(dict.fromkeys(logs)),
        "resources": used,
        "summary_text": summary,
        "finished_at": utc_now(),
    }
    return exp.model_copy(update=update)


def flag(w: _Writer, worker: str) -> None:
    """A worker's call refused by a guard: the denied event and its protocol flag."""
    stage, rule, tool, tried = FLAGS[int(w.rng.integers(len(FLAGS)))]
    refusal = GuardRefusal(rule=rule, stage=stage, message=f"refused: {tried}")
    record = ProtocolFlag(
        campaign_id=w.campaign_id,
        stage=stage,
        rule=rule,
        detail=refusal.message,
        actor=worker,
        role=str(Role.WORKER),
        tool=tool,
    )
    w.tool_call(worker, Role.WORKER, tool, {"tried": tried}, [record], refusal)
