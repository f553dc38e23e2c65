"""textcls: seconds per experiment on 2 threads, dev accuracy, and what fine-tuning costs retrieval.

Each row is one config trained on the full train tier and evaluated on dev, through the
default sandbox with 2 threads per job. ``start`` is the shipped config.json (frozen encoder,
so its retrieval MRR is the pretrained encoder's); ``tuned`` unfreezes the top two layers;
``aggressive`` fine-tunes every layer at a high rate, which buys accuracy and costs the
embeddings their general retrieval quality (the non-target benchmark).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from typing import Any

from rsilab.records import DataTier
from rsilab.sandbox import hand_over
from rsilab.sandbox.base import Limits, RunResult, Sandbox
from rsilab.sandbox.select import default_sandbox
from rsilab.tasks import (
    Task,
    get_task,
    load_manifest,
    make_splits,
    parse_predictions,
    score_outputs,
    task_predict_spec,
    train_spec,
    write_data_dir,
)

THREADS = 2
LIMITS = Limits(cpu_s=3600, wall_s=1800, memory_mb=4096)
CONFIGS: dict[str, dict[str, Any]] = {
    "start": {},
    "tuned": {
        "unfreeze_layers": 2,
        "encoder_lr": 5e-5,
        "max_length": 64,
        "head_lr": 3e-3,
        "epochs": 2,
    },
    "aggressive": {
        "unfreeze_layers": 6,
        "encoder_lr": 3e-4,
        "max_length": 64,
        "head_lr": 3e-3,
        "epochs": 2,
    },
}


def _ok(result: RunResult, what: str) -> None:
    if not result.ok:
        tail = result.stderr.decode(errors="replace").strip()[-400:]
        raise RuntimeError(f"{what} failed ({result.exit_code}, {result.killed}): {tail}")


def _experiment(
    task: Task, sandbox: Sandbox, secret: bytes, overrides: dict[str, Any]
) -> dict[str, Any]:
    splits = {b.name: make_splits(task, b, secret) for b in task.benchmarks}
    with sandbox.scratch(LIMITS.disk_mb, kind="bench-textcls") as tmp:
        workspace = tmp / "ws"
        shutil.copytree(task.harness, workspace)
        config = {**task.default_config(), **overrides}
        (workspace / "config.json").write_text(json.dumps(config))
        manifest = load_manifest(workspace)
        train = [s for sp in splits.values() for s in sp[DataTier.TRAIN]]
        write_data_dir(workspace / "data-in", {DataTier.TRAIN: train})
        hand_over(tmp)  # the sandbox user's, to train in (a no-op unless rsilab is root)
        model = "model/model.safetensors"
        started = time.perf_counter()
        spec = train_spec(
            manifest,
            workspace,
            data="data-in",
            model_out=model,
            seed=0,
            limits=LIMITS,
            threads=THREADS,
        )
        _ok(sandbox.run(spec), "train")
        trained = time.perf_counter()
        scores = {}
        for bench in task.benchmarks:
            samples = splits[bench.name][DataTier.DEV]
            spec = task_predict_spec(
                task, workspace, samples, seed=0, model=model, limits=LIMITS, threads=THREADS
            )
            result = sandbox.run(spec)
            _ok(result, f"predict {bench.name}")
            outputs = parse_predictions(result.stdout, [s.id for s in samples])
            scored = score_outputs(bench.scorer, samples, outputs)
            scores[bench.name] = sum(s.score for s in scored) / len(scored)
        done = time.perf_counter()
        size = (workspace / model).stat().st_size
    return {
        "train s": round(trained - started, 1),
        "predict s (dev, both)": round(done - trained, 1),
        "s / experiment": round(done - started, 1),
        "dev accuracy": round(scores["topic-accuracy"], 3),
        "dev retrieval MRR": round(scores["retrieval"], 3),
        "model MB": round(size / 1e6, 2),
    }


def run(quick: bool) -> list[dict[str, Any]]:
    """One row per config (quick: the starting config only)."""
    task = get_task("textcls")
    sandbox = default_sandbox()
    secret = secrets.token_bytes(32)
    rows: list[dict[str, Any]] = []
    base_mrr: float | None = None
    try:
        for name, overrides in CONFIGS.items():
            if quick and name != "start":
                continue
            load = os.getloadavg()[0]
            row = {"config": name, "sandbox": sandbox.name, "threads": THREADS}
            try:
                row |= _experiment(task, sandbox, secret, overrides)
            except RuntimeError as exc:
                rows.append(row | {"error": str(exc)[:160]})
                continue
            if name == "start":
                base_mrr = row["dev retrieval MRR"]
            if base_mrr is not None:
                row["retrieval vs start"] = round(row["dev retrieval MRR"] - base_mrr, 3)
            row["load avg (1 min) before"] = round(load, 2)
            rows.append(row)
    finally:
        sandbox.close()
    return rows
