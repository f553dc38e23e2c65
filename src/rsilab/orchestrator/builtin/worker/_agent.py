"""Workers: one experiment each, in the Worker's own workspace, on a thread of the loop.

The Main policy decides an :class:`Order` (direction, config, why); the loop begins its intent
``exp:<n>`` on the main thread, so numbers are unique and every order is in the records before
anything runs, then hands it to :meth:`Worker.run` on a pool thread. The Worker prepares its
workspace from the lineage head, writes the config (to the file ``config =`` in the harness's
``harness.toml`` names, as JSON; nothing when it names none), opens the experiment (its
description starts with ``[exp:<n>]``, which ties it to the intent), trains (not a harness
without a train step: its experiment is its dev evaluation), evaluates on dev, closes the
experiment and completes the intent with the result. The heavy work runs in sandboxed
subprocesses, so threads are enough; every store write is its own transaction.

A new attempt (the intent was pending: the runner died, or was stopped with the job
cancelled) continues the experiment the earlier attempt opened, if it did: the same record,
its recorded config, new jobs (the earlier ones are ``interrupted`` or ``cancelled``). So an
experiment is one record however often it was attempted, and counts once against the budget.
A result never lands twice: if a crash fell between closing the experiment and completing its
intent, :func:`adopt` completes the intent from that experiment instead of running it again.

Stopping: once the stop request cancels, a Worker starts no further job; a job killed under it
leaves the experiment open and the intent pending, for the resume to run again.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

from rsilab.errors import UserError
from rsilab.orchestrator.builtin._context import RunContext
from rsilab.orchestrator.builtin._seeds import experiment_seed
from rsilab.orchestrator.builtin._state import EXP_PREFIX, Run, exp_index
from rsilab.orchestrator.campaign import Intents, StopRequest
from rsilab.orchestrator.door import RunnerError
from rsilab.records import DataTier, Evaluation, Experiment, ExperimentState, Intent
from rsilab.store import Store
from rsilab.tasks import (
    HEAD,
    VARIANT_KNOB,
    KnobType,
    ManifestError,
    Task,
    VariantError,
    apply_variant,
    load_manifest,
)

ACTION = "experiment"
"""The action of every ``exp:<n>`` intent."""


@dataclass(frozen=True)
class Order:
    """One experiment the Main policy asked for: run ``config`` under a direction."""

    n: int
    direction_id: str
    config: dict[str, JsonValue]
    """Knobs to write over the head's config file ({} runs the head as it is)."""
    why: str
    payload: dict[str, Any] = field(default_factory=dict)
    """The intent payload as first written (kept as is when an order is run again)."""
    seed: int | None = None
    """The seed its jobs run on, chosen by the policy (common random numbers,
    :mod:`~rsilab.orchestrator.builtin._seeds`); None: the experiment's own,
    :func:`~rsilab.orchestrator.builtin._seeds.experiment_seed`."""

    @property
    def key(self) -> str:
        return f"{EXP_PREFIX}{self.n}"

    def intent_payload(self) -> dict[str, Any]:
        """What the intent records: enough to run the same experiment again after a crash."""
        if self.payload:
            return self.payload
        payload: dict[str, Any] = {
            "direction_id": self.direction_id,
            "config": self.config,
            "why": self.why,
        }
        return payload if self.seed is None else {**payload, "seed": self.seed}

    @classmethod
    def from_intent(cls, intent: Intent) -> Order:
        """The order a pending intent was begun for (older payloads hold only a direction)."""
        p = intent.payload
        config = p.get("config")
        return cls(
            exp_index(intent),
            str(p["direction_id"]),
            dict(config) if isinstance(config, dict) else {},
            str(p.get("why", "re-run")),
            dict(p),
            int(p["seed"]) if p.get("seed") is not None else None,
        )

    def job_seed(self, campaign_seed: int) -> int:
        """The seed this order's jobs run on in a campaign of ``campaign_seed``."""
        return self.seed if self.seed is not None else experiment_seed(campaign_seed, self.n)


class Worker:
    """Runs orders; one instance serves every Worker thread (it keeps no state of its own)."""

    def __init__(self, ctx: RunContext, stop: StopRequest) -> None:
        self.ctx = ctx
        self.stop = stop

    def run(
        self, order: Order, intent: Intent, worker: str, created: threading.Event
    ) -> Run | None:
        """Run ``order`` as ``worker``; the finished run, or None when it was cancelled.

        ``created`` is set once the experiment is recorded (or the run ended before that), so
        the Main policy can wait for it before its next move.
        """
        try:
            return self._run(order, intent, worker, created)
        finally:
            created.set()

    def _run(
        self, order: Order, intent: Intent, worker: str, created: threading.Event
    ) -> Run | None:
        door, target = self.ctx.door, self.ctx.target
        if self.stop.cancelling:
            return None
        door.worker(worker, "prepare_workspace", overwrite=True)
        earlier = open_attempt(self.ctx, order) if intent.attempts > 1 else None
        if earlier is not None:  # the earlier attempt's system, exactly
            full = {**earlier.config, **variant_of(self.ctx, order)}
        else:
            full = {**read_config(self.ctx, worker), **order.config, **variant_of(self.ctx, order)}
        write_system(self.ctx, worker, full)
        exp = earlier.id if earlier is not None else self._create(worker, order, file_config(full))
        created.set()
        scores, cancelled, why = self._train_and_eval(worker, exp, order.job_seed(self.ctx.seed))
        if cancelled:
            return None  # left open: the resume's attempt continues it
        score = scores.get(target)
        door.worker(
            worker,
            "finish_experiment",
            experiment_id=exp,
            status="succeeded" if score is not None else "failed",
            summary=f"dev {target} {score}" if score is not None else f"failed: {why}",
        )
        return _complete(self.ctx, order, intent, exp, full, scores)

    def _create(self, worker: str, order: Order, full: dict[str, JsonValue]) -> str:
        return str(
            self.ctx.door.worker(
                worker,
                "create_experiment",
                direction_id=order.direction_id,
                description=f"{tag(order.key)}{order.why}: "
                f"{json.dumps(order.config, sort_keys=True)}",
                config=full,
            )["id"]
        )

    def _train_and_eval(
        self, worker: str, exp: str, seed: int
    ) -> tuple[dict[str, float], bool, str]:
        """(mean score per benchmark, empty when a job failed; True when the stop request
        cancelled; why there is no target score, for the experiment's summary). Dev scores,
        or out-of-fold train scores where the setting gives no dev."""
        door = self.ctx.door
        if self.stop.cancelling:
            return {}, True, "cancelled"
        if self.ctx.tier is DataTier.TRAIN:  # no dev scores in this setting: folds of train
            folded = door.worker(worker, "run_job", experiment_id=exp, kind="fold_eval", seed=seed)
            if folded["status"] != "succeeded":
                stopped = self.stop.cancelling or folded["status"] == "cancelled"
                return {}, stopped, _job_failure(folded)
            scored = folded.get("fold_scores", {})
            return _floats(scored.get("scores", {})), False, _no_score(scored)
        model: dict[str, Any] = {}
        if self.ctx.manifest.trains:  # else predict alone is the system: evaluate it as it is
            trained = door.worker(worker, "run_job", experiment_id=exp, kind="train", seed=seed)
            if trained["status"] != "succeeded":
                stopped = self.stop.cancelling or trained["status"] == "cancelled"
                return {}, stopped, _job_failure(trained)
            if self.stop.cancelling:
                return {}, True, "cancelled"
            model = {"model": trained["model"]}
        evaluated = door.worker(
            worker, "run_job", experiment_id=exp, kind="dev_eval", seed=seed, **model
        )
        if evaluated["status"] != "succeeded":
            stopped = self.stop.cancelling or evaluated["status"] == "cancelled"
            return {}, stopped, _job_failure(evaluated)
        dev = evaluated.get("dev", {})
        return _floats(dev.get("scores", {})), False, _no_score(dev)


def _job_failure(job: dict[str, Any]) -> str:
    """Why a job ``run_job`` returned did not succeed, in its words."""
    return f"{job.get('kind', 'job')} job {job.get('error') or job.get('status')}"


def _no_score(scored: dict[str, Any]) -> str:
    """Why a job that ran gave no target score: the scoring's error (e.g. predict broke the
    output contract), else that the target was not scored."""
    return str(scored.get("error") or "the target benchmark got no score")


def read_config(ctx: RunContext, worker: str) -> dict[str, JsonValue]:
    """The config in ``worker``'s workspace: the harness's config file read as a JSON object;
    {} when the harness declares none. RunnerError when the file holds no JSON object (the
    built-in policy reads and writes config files as JSON only)."""
    name = ctx.config_file
    if name is None:
        return {}
    text = ctx.door.worker(worker, "read_file", path=name)["text"]
    try:
        return _json_object(text)
    except ValueError as exc:
        raise RunnerError(_not_json(name, str(exc))) from exc


def check_config_file(task: Task) -> None:
    """UserError, before a campaign writes anything, when the config file ``task``'s harness
    names holds no JSON object: the baseline would be recorded from it, and every experiment
    of the built-in policy would then stop on it (a resume too, the head holding that file).
    Its message says which of these it is: the file could not be read (with the system's
    reason), is not UTF-8, is not JSON (with the parser's position), or is JSON but not an
    object; its hint says what to do about that."""
    try:
        name = load_manifest(task.harness).config
    except ManifestError:
        return  # the campaign's harness check says so
    if name is None:
        return
    path = task.harness / name
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise UserError(
            f"the harness's config file {name} could not be read: {exc.strerror or exc}",
            f"make {path} a file this user can read, then run again",
        ) from exc
    except UnicodeDecodeError as exc:
        raise UserError(
            f"the harness's config file {name} is not UTF-8 text "
            f"(byte 0x{exc.object[exc.start]:02x} at offset {exc.start})",
            f"save {path} as UTF-8, then run again",
        ) from exc
    try:
        _json_object(text)
    except ValueError as exc:
        raise UserError(
            _not_json(name, str(exc)), f"edit {path} into a JSON object, then run again"
        ) from exc


_JSON_KINDS = {list: "an array", str: "a string", int: "a number", float: "a number"}


def _json_object(text: str) -> dict[str, JsonValue]:
    """The JSON object ``text`` holds; ValueError saying why it holds none."""
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"it is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
    if not isinstance(config, dict):
        # bool is an int to isinstance, so the kind is looked up by exact type
        kind = _JSON_KINDS.get(type(config), json.dumps(config))
        raise ValueError(f"it is JSON, but {kind}, not an object")
    return config


def _not_json(name: str, why: str) -> str:
    return (
        f"the harness's config file {name} holds no JSON object ({why}); the built-in policy "
        "reads and writes config files as JSON (JSON is valid YAML too): write it as a JSON "
        "object"
    )


def variant_of(ctx: RunContext, order: Order) -> dict[str, JsonValue]:
    """``{VARIANT_KNOB: name}`` of the code variant ``order`` runs (the head's code when it
    names none); {} for a task without variants. The choice is part of the run's config in
    the intent's result (what the policy reads), not of the experiment's recorded config,
    which is the config file's content (what the candidate guard compares)."""
    if not ctx.variants:
        return {}
    return {VARIANT_KNOB: order.config.get(VARIANT_KNOB, HEAD)}


def file_config(config: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """``config`` as the config file holds it: without the code variant's choice."""
    return {k: v for k, v in config.items() if k != VARIANT_KNOB}


def write_system(ctx: RunContext, worker: str, config: dict[str, JsonValue]) -> None:
    """Make ``worker``'s workspace (prepared from the head) the system ``config`` describes:
    its code variant applied (:data:`~rsilab.tasks.VARIANT_KNOB`, the head's code when absent)
    and its knobs written to the config file (the variant's choice is never written there)."""
    apply_code_variant(ctx, worker, config.get(VARIANT_KNOB, HEAD))
    write_config(ctx, worker, file_config(config))


def apply_code_variant(ctx: RunContext, worker: str, name: JsonValue) -> None:
    """Apply the task's code variant ``name`` to ``worker``'s workspace through the workspace
    tools (nothing for :data:`~rsilab.tasks.HEAD`). RunnerError when the task has no such
    variant or it does not fit the head's code (:class:`~rsilab.tasks.VariantError`)."""
    if name == HEAD:
        return
    variant = ctx.variants.get(str(name))
    if variant is None:
        raise RunnerError(f"task {ctx.task.name!r} has no code variant {name!r}")

    def read(path: str) -> str:
        return str(ctx.door.worker(worker, "read_file", path=path)["text"])

    try:
        texts = apply_variant(variant, read)
    except VariantError as exc:
        raise RunnerError(str(exc)) from exc
    for path, text in texts.items():
        ctx.door.worker(worker, "write_file", path=path, content=text)


def write_config(ctx: RunContext, worker: str, config: dict[str, JsonValue]) -> None:
    """Write ``config`` as JSON to the harness's config file in ``worker``'s workspace (nothing
    when the harness declares none, and so ``config`` is empty)."""
    if ctx.config_file is not None:
        # the records keep JSON canonically (RFC 8785 writes 1.0 as 1), so a float knob read
        # back from them is written as a float again: a harness may check its types
        floats = {k.name for k in ctx.space if k.type is KnobType.FLOAT}
        typed = {
            name: float(value)
            if name in floats and isinstance(value, int) and not isinstance(value, bool)
            else value
            for name, value in config.items()
        }
        ctx.door.worker(worker, "write_file", path=ctx.config_file, content=json.dumps(typed))


def _floats(scores: dict[str, Any]) -> dict[str, float]:
    return {str(name): float(value) for name, value in scores.items() if value is not None}


def tag(key: str) -> str:
    """How an experiment's description names the intent it was opened for."""
    return f"[{key}] "


def attempts_of(ctx: RunContext, key: str) -> list[Experiment]:
    """The experiments opened for the intent ``key``, oldest first."""
    found = ctx.store.query_as(Experiment, campaign_id=ctx.campaign_id)
    return sorted(
        (e for e in found if e.description.startswith(tag(key))), key=lambda e: e.created_at
    )


def open_attempt(ctx: RunContext, order: Order) -> Experiment | None:
    """The experiment an earlier attempt of ``order`` opened and did not close, if any."""
    still_open = [e for e in attempts_of(ctx, order.key) if not e.is_finished()]
    return still_open[-1] if still_open else None


def adopt(ctx: RunContext, order: Order, intent: Intent) -> Run | None:
    """Complete ``intent`` from an experiment an earlier attempt closed (succeeded or failed)
    but could not record as done before the runner died; None when there is none."""
    closed = [
        e
        for e in attempts_of(ctx, order.key)
        if e.state in (ExperimentState.SUCCEEDED, ExperimentState.FAILED)
    ]
    if not closed:
        return None
    exp = closed[-1]
    scores = _scores(ctx, exp.id) if exp.state is ExperimentState.SUCCEEDED else {}
    config = {**exp.config, **variant_of(ctx, order)}
    return _complete(ctx, order, intent, exp.id, config, scores)


def _scores(ctx: RunContext, experiment_id: str) -> dict[str, float]:
    """The mean per-sample score per benchmark of the experiment's latest evaluation on the
    policy's tier."""
    latest: dict[str, Evaluation] = {}
    for e in ctx.store.query_as(Evaluation, fields={"subject_id": experiment_id}):
        newer = e.benchmark not in latest or e.created_at > latest[e.benchmark].created_at
        if e.tier == ctx.tier and e.samples and newer:
            latest[e.benchmark] = e
    return {b: sum(s.score for s in e.samples) / len(e.samples) for b, e in latest.items()}


def _complete(
    ctx: RunContext,
    order: Order,
    intent: Intent,
    experiment_id: str,
    config: dict[str, JsonValue],
    scores: dict[str, float],
) -> Run:
    """Record the experiment's intent done: its target score as measured (0.0 and ``failed``
    when it has none) and every benchmark's score, which the view weighs against the
    non-targets' tolerances. The run returned carries the score oriented, as the view's do."""
    score = scores.get(ctx.target)
    result: dict[str, Any] = {
        "experiment_id": experiment_id,
        "direction_id": order.direction_id,
        "config": config,
        "score": score if score is not None else 0.0,
        "scores": dict(scores),
        "seed": order.job_seed(ctx.seed),
    }
    if score is None:
        result["failed"] = True
    ctx.intents.complete(intent, result)
    return Run(
        order.n,
        experiment_id,
        order.direction_id,
        config,
        0.0 if score is None else ctx.target_benchmark.oriented(score),
        score is None,
        dict(scores),
        seed=order.job_seed(ctx.seed),
    )


def kept_for_resume(store: Store, campaign_id: str) -> Callable[[Experiment], bool]:
    """Whether an open experiment belongs to a pending ``exp:<n>`` intent (the resume's new
    attempt continues it, so recovery must leave it open)."""
    keys = [i.key for i in Intents(store, campaign_id).pending() if i.key.startswith(EXP_PREFIX)]
    return lambda e: any(e.description.startswith(tag(k)) for k in keys)
