"""Seconds per experiment of each built-in task (train + predict on dev, default sandbox)."""

from __future__ import annotations

import secrets
import statistics
from typing import Any

from rsilab.sandbox.select import default_sandbox
from rsilab.tasks import ExperimentFailed, get_task, run_experiment, task_names


def run(quick: bool) -> list[dict[str, Any]]:
    """One row per built-in task: median seconds over repeats, dev scores, the figure recorded."""
    repeats = 1 if quick else 3
    sandbox = default_sandbox()
    secret = secrets.token_bytes(32)
    rows: list[dict[str, Any]] = []
    try:
        for name in task_names():
            task = get_task(name)
            seconds: list[float] = []
            scores: dict[str, float] = {}
            try:
                for seed in range(repeats):
                    outcome = run_experiment(task, sandbox, secret, seed=seed)
                    seconds.append(outcome.seconds)
                    scores = outcome.scores
            except ExperimentFailed as exc:
                rows.append({"task": name, "sandbox": sandbox.name, "error": str(exc)[:120]})
                continue
            recorded = task.seconds_per_experiment
            rows.append(
                {
                    "task": name,
                    "sandbox": sandbox.name,
                    "runs": repeats,
                    "s / experiment (median)": round(statistics.median(seconds), 2),
                    "recorded in task": "-" if recorded is None else recorded,
                    "dev scores (start)": ", ".join(f"{k}={v:.3f}" for k, v in scores.items()),
                }
            )
    finally:
        sandbox.close()
    return rows
