"""One experiment through the harness contract: train (if any), predict on a tier, score.

A reference path for measuring seconds per experiment and for end-to-end tests; the
controller composes the same pieces (``train_spec``, ``task_predict_spec``,
``parse_predictions``, ``score_outputs``) with its own seeds, limits and records.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from rsilab.records import DataTier
from rsilab.sandbox import hand_over, run_holding_gpus
from rsilab.sandbox.base import Limits, RunResult, Sandbox, why_killed
from rsilab.tasks._drivers import task_predict_spec
from rsilab.tasks._harness import (
    DATA_DIR,
    MODEL_SUFFIX,
    HarnessOutputError,
    load_manifest,
    parse_predictions,
    train_spec,
)
from rsilab.tasks._scorers import Scored, score_outputs
from rsilab.tasks._spec import Task
from rsilab.tasks._splits import make_splits, write_data_dir


class ExperimentFailed(RuntimeError):
    """A job failed or broke the contract; ``result`` is the job's RunResult when there is one."""

    def __init__(self, message: str, result: RunResult | None = None) -> None:
        super().__init__(message)
        self.result = result


@dataclass
class Outcome:
    """What one experiment produced."""

    seconds: float
    scores: dict[str, float] = field(default_factory=dict)
    samples: dict[str, list[Scored]] = field(default_factory=dict)
    model: Path | None = None


def _check(result: RunResult, what: str, limits: Limits) -> None:
    if not result.ok:
        tail = result.stderr.decode(errors="replace").strip()[-600:]
        if result.killed:
            reason = f"killed: {why_killed(result.killed, limits)}"
        else:
            reason = f"exit {result.exit_code}"
        ends = f": {tail}" if tail else " (it wrote nothing on stderr)"
        raise ExperimentFailed(f"{what} failed: {reason}{ends}", result)


def run_experiment(
    task: Task,
    sandbox: Sandbox,
    secret: bytes,
    *,
    seed: int = 0,
    tier: DataTier = DataTier.DEV,
    workspace: Path | None = None,
    limits: Limits | None = None,
) -> Outcome:
    """Train on the train tier (if the harness trains), predict and score ``tier``.

    ``workspace`` (a harness copy, kept) defaults to a fresh temporary copy of the task's
    harness. Private tiers may be scored here: this runs on the controller side.

    Raises:
        ExperimentFailed: a job failed, or predict's output broke the contract.
    """
    limits = limits or Limits()
    if workspace is not None:
        return _run(task, sandbox, secret, seed, tier, workspace, limits)
    with sandbox.scratch(limits.disk_mb, kind="exp") as scratch:
        workspace = scratch / "workspace"
        shutil.copytree(task.harness, workspace, symlinks=True)
        hand_over(scratch)  # the copy is the sandbox user's (a no-op unless rsilab is root)
        return _run(task, sandbox, secret, seed, tier, workspace, limits)


def _run(
    task: Task,
    sandbox: Sandbox,
    secret: bytes,
    seed: int,
    tier: DataTier,
    workspace: Path,
    limits: Limits,
) -> Outcome:
    started = time.perf_counter()
    manifest = load_manifest(workspace)
    splits = {b.name: make_splits(task, b, secret) for b in task.benchmarks}
    model: str | None = None
    if manifest.trains:
        train = {DataTier.TRAIN: [s for sp in splits.values() for s in sp[DataTier.TRAIN]]}
        write_data_dir(workspace / DATA_DIR, train)
        model = f"model/model{MODEL_SUFFIX[manifest.model]}"
        # train finds the folder of --model-out made, as a campaign's train jobs do
        (workspace / model).parent.mkdir(exist_ok=True)
        hand_over(workspace)
        spec = train_spec(
            manifest, workspace, data=DATA_DIR, model_out=model, seed=seed, limits=limits
        )
        _check(run_holding_gpus(sandbox, spec), "train", spec.limits)  # GPUs of its own
    outcome = Outcome(seconds=0.0, model=workspace / model if model else None)
    for bench in task.benchmarks:
        samples = splits[bench.name][tier]
        spec = task_predict_spec(
            task, workspace, samples, seed=seed, model=model, manifest=manifest, limits=limits
        )
        result = run_holding_gpus(sandbox, spec)
        _check(result, f"predict on {bench.name}/{tier.value}", spec.limits)
        try:
            outputs = parse_predictions(result.stdout, [s.id for s in samples])
        except HarnessOutputError as exc:
            raise ExperimentFailed(f"predict on {bench.name}: {exc}", result) from exc
        # a batch scorer that runs code (python_tests) uses this experiment's sandbox
        scored = score_outputs(bench.scorer, samples, outputs, sandbox=sandbox)
        outcome.samples[bench.name] = scored
        outcome.scores[bench.name] = sum(s.score for s in scored) / max(len(scored), 1)
    outcome.seconds = time.perf_counter() - started
    return outcome
