"""Evaluate a system as the controller: re-train it with seeds of its own, score private tiers.

For each controller seed, in a fresh throwaway folder made from the stored harness tree (never
the agent's workspace): write the data folder the setting allows (train tier, dev tier with or
without labels, registered datasets the candidate names), run ``train`` in a sandbox (a recorded
job: its model's hash is kept), then run ``predict`` (or the task's driver) in a sandbox on the
accept and final tiers of every benchmark, with the inputs on stdin. Outputs and logs stay with
the controller. Any failure of the contract makes the system invalid, with a readable reason.

A job that fails for a cause outside the candidate (killed from outside, the sandbox could not
run it: :mod:`rsilab.controller.blame`) is not the candidate's failure: its seed is attempted
again in a fresh folder with the same seed, and after three attempts the evaluation raises
:class:`~rsilab.controller.blame.EvaluationFault`, deciding nothing. Every attempt, and every
evaluation resumed after a kill, reuses the jobs already recorded as succeeded with the same
key (:func:`~rsilab.controller.jobs.recorded_success`): a finished train's stored model is put
where that train wrote it, and a finished predict's stored output is read again.

On request (``probe_model``), the first seed's folder also gets a *model-use probe*: once its
predict has run, the model file train wrote is emptied (same name, zero bytes; the trained
model is already stored) and predict runs once more, on the accept tiers only. A predict that
uses its model fails or answers differently; one whose outputs are the same on every accept
sample ignores the model the controller trained (answers shipped in the tree, weights under
another file type), which :attr:`SystemEvaluation.model_ignored` reports. Cost: one extra
recorded predict job per candidate, on the accept half of the private samples (for 3 seeds,
about a sixth more predict work; the job's resources count in the candidate's).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np
from pydantic import JsonValue

from rsilab.controller.blame import (
    ATTEMPTS,
    EvaluationFault,
    OutsideFault,
    machine_lost,
    outside_cause,
)
from rsilab.controller.jobs import (
    CONTROLLER_ACTOR,
    data_hashes,
    new_job,
    recorded_success,
    run_recorded_job,
)
from rsilab.controller.settings import rules_for
from rsilab.executors.base import Executor, JobInterrupted, JobResult
from rsilab.faults import fault_point
from rsilab.records import DataTier, Job, JobInputs, JobKind, JobStatus, Resources, Role
from rsilab.sandbox import hand_over
from rsilab.sandbox.base import KillReason, Limits, RunSpec, why_killed
from rsilab.sandbox.nofollow import write_empty
from rsilab.store.artifacts import ArtifactStore
from rsilab.store.base import Store
from rsilab.tasks import (
    DATA_DIR,
    MODEL_SUFFIX,
    HarnessOutputError,
    Manifest,
    ManifestError,
    Sample,
    Splits,
    Task,
    derive_seed,
    load_manifest,
    make_splits,
    parse_predictions,
    score_outputs,
    task_predict_spec,
    train_spec,
    write_data_dir,
)

log = logging.getLogger(__name__)

MODEL_DIR = "model-out"
MODEL_IN_DIR = "model-in"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
"""Hash of the emptied model the model-use probe gives predict."""
PRIVATE_TIERS: tuple[DataTier, ...] = (DataTier.ACCEPT, DataTier.FINAL)


class SystemInvalid(Exception):
    """The system does not build, crashes, times out or breaks the output contract.

    ``reason`` is for people (it may quote logs of jobs that saw private inputs); ``public``
    is what an agent may be told: the step that failed, never a log line or a private value.
    """

    def __init__(self, reason: str, public: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.public = public if public is not None else reason


@dataclass(frozen=True)
class Recipe:
    """What the controller rebuilds a system from; everything is a stored artifact.

    Attributes:
        harness_sha256: tree hash of the harness (with its config).
        extra_data: dataset name -> (sha256, "file" | "tree") of registered data it trains on.
        warm_start: per-seed-index model hashes to start training from (the parent's), or None.
    """

    harness_sha256: str
    extra_data: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    warm_start: Sequence[str] | None = None


@dataclass
class ScoreTable:
    """Scores of one benchmark tier: ``scores[seed_index][sample_index]``, samples by id order."""

    sample_ids: list[str]
    scores: np.ndarray
    invalid: int = 0


@dataclass
class SystemEvaluation:
    """What evaluating one system produced."""

    seeds: list[int]
    models: list[str | None]
    tables: dict[tuple[str, DataTier], ScoreTable]
    job_ids: list[str]
    resources: Resources
    model_ignored: bool | None = None
    """The model-use probe's finding: True when predict answered every accept sample alike
    with the trained model emptied; False when it failed or answered differently; None when
    no probe ran (not asked, or nothing trained)."""
    predictions: list[str] = field(default_factory=list)
    """Per seed, the sha256 of predict's outputs on the private tiers (canonical JSON in
    sample order): equal hashes mean the seeds answered every private sample alike."""


def controller_seeds(secret: bytes, subject: str, count: int) -> list[int]:
    """Seeds the controller trains ``subject`` with: derived from the lab secret, so no agent
    can know them in advance, and below 2**31 so every library accepts them."""
    return [derive_seed(secret, "controller-seed", subject, str(i)) % 2**31 for i in range(count)]


def public_data(task: Task, splits: Mapping[str, Splits]) -> dict[DataTier, list[Sample]]:
    """The data folder's tiers: train with labels; dev with labels only where the setting
    gives them (otherwise inputs only). Identical for agents' jobs and the controller's."""
    rules = rules_for(task.setting)
    train = [s for sp in splits.values() for s in sp[DataTier.TRAIN]]
    dev = [s for sp in splits.values() for s in sp[DataTier.DEV]]
    if not rules.dev_labels_in_workspace:
        dev = [s.model_copy(update={"target": None}) for s in dev]
    return {DataTier.TRAIN: train, DataTier.DEV: dev}


def safe_data_name(name: str) -> str:
    """``name`` as a single path component, for ``data-in/extra/<name>``.

    Raises:
        SystemInvalid: the name would leave its folder (separators, ``..``, empty).
    """
    if not name or name in {".", ".."} or "/" in name or "\\" in name or "\x00" in name:
        raise SystemInvalid(f"dataset name {name!r} is not a plain file name")
    return name


def check_tree_links(root: Path) -> None:
    """Refuse symlinks that leave ``root`` (absolute or escaping targets).

    Raises:
        SystemInvalid: naming the first such link.
    """
    for path in root.rglob("*"):
        if path.is_symlink():
            target = PurePosixPath(os.readlink(path))
            resolved = (path.parent / target).resolve()
            if target.is_absolute() or not resolved.is_relative_to(root.resolve()):
                rel = path.relative_to(root)
                raise SystemInvalid(f"{rel} is a link that leaves the harness ({target})")


class SystemEvaluator:
    """Runs the controller's evaluation of recipes for one task in one lab."""

    def __init__(
        self,
        task: Task,
        secret: bytes,
        store: Store,
        artifacts: ArtifactStore,
        executor: Executor,
        *,
        limits: Limits | None = None,
    ) -> None:
        self.task = task
        self.secret = secret
        self.store = store
        self.artifacts = artifacts
        self.executor = executor
        # the task's [limits] raise the controller's: its jobs never get less than an experiment's
        self.limits = limits or task.controller_limits()
        self.splits = {b.name: make_splits(task, b, secret) for b in task.benchmarks}

    def private_samples(self, benchmark: str, tier: DataTier) -> list[Sample]:
        """The private samples of one benchmark tier, in id order (the tables' column order)."""
        return sorted(self.splits[benchmark][tier], key=lambda s: s.id)

    def evaluate(
        self,
        recipe: Recipe,
        seeds: Sequence[int],
        *,
        campaign_id: str | None,
        candidate_id: str | None,
        probe_model: bool = False,
    ) -> SystemEvaluation:
        """Train (if the harness trains) and score every benchmark's private tiers per seed.

        Seeds run in parallel up to the executor's slots. With ``probe_model``, the first seed
        also runs the model-use probe (see the module docstring) when the harness trains.

        Raises:
            SystemInvalid: the harness does not load, a job fails, or predict breaks the
                contract; the reason names the seed, the step and what went wrong. It wins
                over an EvaluationFault of another seed: the candidate's failure decides.
            EvaluationFault: a seed's jobs kept failing for causes outside the candidate.
            LabError: the lab could not be written.
        """
        with ThreadPoolExecutor(max_workers=max(1, len(seeds))) as pool:
            futures = [
                pool.submit(
                    self._one_seed,
                    recipe,
                    i,
                    seed,
                    campaign_id,
                    candidate_id,
                    probe_model and i == 0,
                )
                for i, seed in enumerate(seeds)
            ]
            per_seed = _results(futures)
        tables: dict[tuple[str, DataTier], ScoreTable] = {}
        for bench in self.task.benchmarks:
            for tier in PRIVATE_TIERS:
                ids = [s.id for s in self.private_samples(bench.name, tier)]
                rows = [result.scores[(bench.name, tier)] for result in per_seed]
                invalid = sum(result.invalid[(bench.name, tier)] for result in per_seed)
                tables[(bench.name, tier)] = ScoreTable(ids, np.array(rows, float), invalid)
        total = Resources()
        for result in per_seed:
            total = Resources(
                cpu_s=total.cpu_s + result.resources.cpu_s,
                wall_s=total.wall_s + result.resources.wall_s,
                peak_rss_mb=max(total.peak_rss_mb, result.resources.peak_rss_mb),
            )
        return SystemEvaluation(
            seeds=list(seeds),
            models=[r.model for r in per_seed],
            tables=tables,
            job_ids=[j for r in per_seed for j in r.job_ids],
            resources=total,
            model_ignored=per_seed[0].model_ignored if per_seed else None,
            predictions=[r.predictions for r in per_seed],
        )

    def _one_seed(
        self,
        recipe: Recipe,
        index: int,
        seed: int,
        campaign_id: str | None,
        candidate_id: str | None,
        probe_model: bool = False,
    ) -> _SeedResult:
        """One seed's jobs, attempted again (fresh folder, same seed) when a job failed for a
        cause outside the candidate; jobs already recorded as succeeded are reused.

        Raises:
            EvaluationFault: :data:`~rsilab.controller.blame.ATTEMPTS` attempts each failed
                for a cause outside the candidate (see :mod:`rsilab.controller.blame`).
        """
        causes: list[str] = []
        spent = _SeedResult()
        for _ in range(ATTEMPTS):
            # jobs of failed attempts stay in the seed's record and cost
            result = _SeedResult(job_ids=list(spent.job_ids), resources=spent.resources)
            try:
                return self._attempt(
                    recipe, index, seed, campaign_id, candidate_id, probe_model, result
                )
            except OutsideFault as fault:
                log.warning("seed %d: %s; running it again", index + 1, fault.cause)
                causes.append(fault.cause)
                spent = result
        raise EvaluationFault(index, causes)

    def _attempt(
        self,
        recipe: Recipe,
        index: int,
        seed: int,
        campaign_id: str | None,
        candidate_id: str | None,
        probe_model: bool,
        result: _SeedResult,
    ) -> _SeedResult:
        # A scratch workspace: the sandbox user's, its own size-limited filesystem where the
        # sandbox can; deleted afterwards with everything the jobs wrote.
        with self.executor.scratch(self.limits.disk_mb, kind="controller") as tmp:
            workspace = tmp / "system"
            self.artifacts.materialize(recipe.harness_sha256, workspace, "tree")
            hand_over(tmp)
            fault_point("baseline_seed" if candidate_id is None else "candidate_seed")
            check_tree_links(workspace)
            return self._run_seed(
                recipe, workspace, index, seed, campaign_id, candidate_id, result, probe_model
            )

    def _run_seed(
        self,
        recipe: Recipe,
        workspace: Path,
        index: int,
        seed: int,
        campaign_id: str | None,
        candidate_id: str | None,
        result: _SeedResult,
        probe_model: bool = False,
    ) -> _SeedResult:
        try:
            manifest = load_manifest(workspace)
        except ManifestError as exc:
            raise SystemInvalid(f"the harness does not load: {exc}") from None
        model: str | None = None
        if manifest.trains:
            model = self._train(
                recipe, workspace, manifest, index, seed, result, campaign_id, candidate_id
            )
        samples = [
            s
            for bench in self.task.benchmarks
            for tier in PRIVATE_TIERS
            for s in self.private_samples(bench.name, tier)
        ]
        # predict runs read-only on the same throwaway folder (the model train wrote is there);
        # the folder is deleted afterwards, so nothing a job does outlives the evaluation.
        spec = self._predict_spec(workspace, samples, seed, model, manifest)
        inputs = _predict_inputs(recipe, spec, result.model, seed)
        done, _ = self._recorded(
            JobKind.CONTROLLER_PREDICT, inputs, spec, result, campaign_id, candidate_id
        )
        if done.status is not JobStatus.SUCCEEDED or done.stdout_sha256 is None:
            how = (
                f"killed: {why_killed(KillReason(done.kill_reason), spec.limits)}"
                if done.kill_reason
                else "it failed"
            )
            raise SystemInvalid(
                f"seed {index + 1}: predict failed: {done.error}",
                f"predict on the private tiers did not finish: {how}",
            )
        stdout = self.artifacts.read_bytes(done.stdout_sha256)
        try:
            outputs = parse_predictions(stdout, [s.id for s in samples])
        except HarnessOutputError as exc:
            raise SystemInvalid(
                f"seed {index + 1}: predict broke the output contract: {exc}",
                "predict broke the output contract on the private tiers (one JSON object "
                "with id and output per input line, in order)",
            ) from None
        canonical = json.dumps([outputs[s.id] for s in samples], sort_keys=True)
        result.predictions = hashlib.sha256(canonical.encode()).hexdigest()
        for bench in self.task.benchmarks:
            for tier in PRIVATE_TIERS:
                tier_samples = self.private_samples(bench.name, tier)
                # jobs run through the executor, so there is no sandbox here: a scorer that runs
                # code (python_tests) uses its own bubblewrap sandbox, bound to no lab
                scored = score_outputs(bench.scorer, tier_samples, outputs)
                values = [s.score for s in scored]
                if not all(np.isfinite(values)):
                    raise SystemInvalid(
                        f"seed {index + 1}: {bench.name}: some outputs could not be scored "
                        f"({sum(1 for s in scored if not s.valid)} invalid)"
                    )
                result.scores[(bench.name, tier)] = values
                result.invalid[(bench.name, tier)] = sum(1 for s in scored if not s.valid)
        if probe_model and model is not None:
            result.model_ignored = self._model_ignored(
                recipe, workspace, manifest, model, seed, outputs, result, campaign_id, candidate_id
            )
        return result

    def _predict_spec(
        self,
        workspace: Path,
        samples: list[Sample],
        seed: int,
        model: str | None,
        manifest: Manifest,
    ) -> RunSpec:
        """The controller's predict job on ``samples``: read-only on ``workspace`` (predict
        sees the candidate and its model, writes nothing), the task's data sources hidden."""
        spec = task_predict_spec(
            self.task,
            workspace,
            samples,
            seed=seed,
            model=model,
            manifest=manifest,
            limits=self.limits,
        )
        return RunSpec(
            spec.argv,
            spec.workspace,
            spec.limits,
            stdin=spec.stdin,
            hidden=tuple(self.task.data_sources),
            read_only_workspace=True,
            gpus=spec.gpus,
        )

    def _model_ignored(
        self,
        recipe: Recipe,
        workspace: Path,
        manifest: Manifest,
        model: str,
        seed: int,
        outputs: Mapping[str, JsonValue],
        result: _SeedResult,
        campaign_id: str | None,
        candidate_id: str | None,
    ) -> bool:
        """The model-use probe: True when predict, run again on the accept tiers with the
        model file emptied, answers every sample exactly as it did with the trained model."""
        samples = [
            s
            for bench in self.task.benchmarks
            for s in self.private_samples(bench.name, DataTier.ACCEPT)
        ]
        # The trained model is stored already (its job recorded its hash), so emptying the
        # throwaway copy loses nothing. An empty file, not a missing one: a predict that
        # checks the path exists must still be given something that holds no weights.
        # written without following a link: predict ran read-only, but a link the candidate's
        # train left on the way would have the controller truncate a host file
        try:
            write_empty(workspace, model)
        except OSError as exc:
            raise SystemInvalid(
                f"the model-use probe: the model path {model!r} cannot be emptied: {exc}",
                "the model path its train left passes through a link or is not a file",
            ) from exc
        spec = self._predict_spec(workspace, samples, seed, model, manifest)
        inputs = _predict_inputs(recipe, spec, EMPTY_SHA256, seed)
        done, _ = self._recorded(
            JobKind.CONTROLLER_PREDICT, inputs, spec, result, campaign_id, candidate_id
        )
        if done.status is not JobStatus.SUCCEEDED or done.stdout_sha256 is None:
            return False  # it needed the model: what a predict that uses one does
        ids = [s.id for s in samples]
        try:
            probed = parse_predictions(self.artifacts.read_bytes(done.stdout_sha256), ids)
        except HarnessOutputError:
            return False
        return all(probed[i] == outputs[i] for i in ids)

    def _train(
        self,
        recipe: Recipe,
        workspace: Path,
        manifest: Manifest,
        index: int,
        seed: int,
        result: _SeedResult,
        campaign_id: str | None,
        candidate_id: str | None,
    ) -> str:
        data = workspace / DATA_DIR
        # Whatever the tree holds at these paths is replaced: only recorded inputs go in.
        for folder in (data, workspace / MODEL_DIR, workspace / MODEL_IN_DIR):
            if folder.is_symlink() or folder.is_file():
                folder.unlink()
            elif folder.exists():
                shutil.rmtree(folder)
        write_data_dir(data, public_data(self.task, self.splits))
        for name, (sha, kind) in sorted(recipe.extra_data.items()):
            self.artifacts.materialize(
                sha, data / "extra" / safe_data_name(name), "tree" if kind == "tree" else "file"
            )
        suffix = MODEL_SUFFIX[manifest.model]
        model_in: str | None = None
        model_in_sha: str | None = None
        if recipe.warm_start is not None:
            model_in_sha = recipe.warm_start[index % len(recipe.warm_start)]
            model_in = f"{MODEL_IN_DIR}/model{suffix}"
            self.artifacts.materialize(model_in_sha, workspace / model_in, "file")
        model_out = f"{MODEL_DIR}/model{suffix}"
        (workspace / MODEL_DIR).mkdir()
        spec = train_spec(
            manifest,
            workspace,
            data=DATA_DIR,
            model_out=model_out,
            seed=seed,
            model_in=model_in,
            limits=self.limits,
        )
        spec = RunSpec(
            spec.argv,
            spec.workspace,
            spec.limits,
            hidden=tuple(self.task.data_sources),
            gpus=spec.gpus,
        )
        hand_over(workspace)  # what was written here is the sandbox user's, to train in
        inputs = JobInputs(
            workspace_sha256=recipe.harness_sha256,
            data_sha256=data_hashes(data),
            model_in_sha256=model_in_sha,
            config=manifest.config,
            seed=seed,
            argv=list(spec.argv),
        )
        done, reused = self._recorded(
            JobKind.CONTROLLER_TRAIN, inputs, spec, result, campaign_id, candidate_id, model_out
        )
        if reused and done.model_out_sha256 is not None:
            # the model a finished train recorded, where that train wrote it (predict is
            # given this file; anything else a train leaves in its folder is not kept)
            self.artifacts.materialize(done.model_out_sha256, workspace / model_out, "file")
            hand_over(workspace, workspace / MODEL_DIR)
        if done.model_out_sha256 is None:
            raise SystemInvalid(
                f"seed {index + 1}: train failed: {done.error}",
                f"train failed when the controller re-trained it ({done.kill_reason or 'error'})",
            )
        result.model = done.model_out_sha256
        return model_out

    def _recorded(
        self,
        kind: JobKind,
        inputs: JobInputs,
        spec: RunSpec,
        result: _SeedResult,
        campaign_id: str | None,
        candidate_id: str | None,
        model_out: str | None = None,
    ) -> tuple[Job, bool]:
        """Run one controller job as a recorded job, or reuse the first recorded success with
        the same key (see :func:`~rsilab.controller.jobs.recorded_success`): the job and
        whether it was reused. Its id and resources go to ``result``.

        Raises:
            OutsideFault: the job failed for a cause outside the candidate, or the machine
                running it went away (the job is recorded ``interrupted``).
        """
        job = new_job(
            kind,
            inputs,
            campaign_id=campaign_id,
            actor=CONTROLLER_ACTOR,
            candidate_id=candidate_id,
            model_out=model_out,
        )
        done = recorded_success(self.store, self.artifacts, job)
        reused = done is not None
        run: JobResult | None = None
        if done is None:
            try:
                done, run = run_recorded_job(
                    self.store, self.artifacts, self.executor, job, spec,
                    actor=CONTROLLER_ACTOR, role=Role.CONTROLLER,
                )  # fmt: skip
            except JobInterrupted as lost:  # recorded interrupted; the seed is run again
                raise OutsideFault(machine_lost(kind, lost.cause)) from lost
        result.job_ids.append(done.id)
        result.add(done.resources)
        cause = None if reused else outside_cause(done, run)
        if cause is not None:
            raise OutsideFault(cause)
        return done, reused


def _results(futures: Sequence[Future[_SeedResult]]) -> list[_SeedResult]:
    """Every seed's result; else the first seed's SystemInvalid (the candidate's failure
    decides), else the first other error."""
    errors = [f.exception() for f in futures]
    for error in errors:
        if isinstance(error, SystemInvalid):
            raise error
    for error in errors:
        if error is not None:
            raise error
    return [f.result() for f in futures]


def _predict_inputs(recipe: Recipe, spec: RunSpec, model: str | None, seed: int) -> JobInputs:
    """What a controller predict is made from; its stdin (the private inputs) by hash, so a
    recorded predict is reused only for the very inputs it answered."""
    return JobInputs(
        workspace_sha256=recipe.harness_sha256,
        data_sha256={"stdin": hashlib.sha256(spec.stdin).hexdigest()},
        model_in_sha256=model,
        seed=seed,
        argv=list(spec.argv[:2]),
    )


@dataclass
class _SeedResult:
    scores: dict[tuple[str, DataTier], list[float]] = field(default_factory=dict)
    invalid: dict[tuple[str, DataTier], int] = field(default_factory=dict)
    model: str | None = None
    model_ignored: bool | None = None
    predictions: str = ""
    job_ids: list[str] = field(default_factory=list)
    resources: Resources = field(default_factory=Resources)

    def add(self, used: Resources) -> None:
        self.resources = Resources(
            cpu_s=self.resources.cpu_s + used.cpu_s,
            wall_s=self.resources.wall_s + used.wall_s,
            peak_rss_mb=max(self.resources.peak_rss_mb, used.peak_rss_mb),
        )
