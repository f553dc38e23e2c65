"""Ray executor: the latency it adds to a short job, over the local executor.

One short job (``python -c pass`` in bubblewrap, a workspace holding a 64 KiB file) is run
through :class:`~rsilab.executors.LocalExecutor` and through
:class:`~rsilab.executors.RayExecutor` on a single-node Ray cluster that the executor starts
on this machine (loopback, token authentication, one CPU), in turns, so drift hits both alike.
Both run the job in the same bubblewrap sandbox; what the Ray row adds is Ray's scheduling,
the task's round trip, and packing the workspace to the node and its changes back
(:mod:`rsilab.executors._ray_bundle`). The cluster's start and preflight (seconds, once per
process) are reported apart, not in the per-job figure.

Target: at most 0.5 s added per short job (median), so a campaign of jobs of tens of seconds
loses a few per cent at most.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from rsilab.executors import JobSpec, LocalExecutor, RayExecutor
from rsilab.sandbox import BwrapSandbox, Limits
from rsilab.sandbox.base import SandboxUnavailable
from rsilab.store.artifacts import ArtifactStore

LIMITS = Limits(cpu_s=30, wall_s=60, memory_mb=256, processes=32, disk_mb=64)
TARGET_ADDED_S = 0.5


def run(quick: bool) -> list[dict[str, Any]]:
    """Rows: the local executor, the Ray executor, and the cluster's one-off start."""
    rounds = 5 if quick else 30
    try:
        sandbox = BwrapSandbox()
        sandbox.prepare()
    except SandboxUnavailable as exc:
        return [{"benchmark": "short job, Ray over local", "note": f"not measured: {exc}"}]
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="rsilab-bench-ray-") as tmp:
        artifacts = ArtifactStore(Path(tmp) / "artifacts")
        artifacts.ensure()
        started = time.perf_counter()
        ray_executor = RayExecutor(sandbox, artifacts, num_cpus=1, slots=1)
        start_s = time.perf_counter() - started
        local = LocalExecutor(sandbox, artifacts, slots=1)
        try:
            walls = _interleaved({"local": local, "ray": ray_executor}, sandbox, rounds)
        finally:
            ray_executor.shutdown()
            local.shutdown()
    sandbox.close()
    load = max(load, os.getloadavg()[0])
    added = statistics.median(walls["ray"]) - statistics.median(walls["local"])
    return [
        _row("short job, local executor", walls["local"], load, "reference"),
        {
            **_row("short job, Ray executor", walls["ray"], load, f"<= +{TARGET_ADDED_S} s"),
            "added_median_s": round(added, 4),
        },
        {"benchmark": "Ray cluster start and preflight (once)", "best_s": round(start_s, 2)},
    ]


def _interleaved(
    executors: dict[str, LocalExecutor | RayExecutor], sandbox: BwrapSandbox, rounds: int
) -> dict[str, list[float]]:
    walls: dict[str, list[float]] = {name: [] for name in executors}
    with sandbox.scratch(64, "bench-ray") as workspace:
        (workspace / "data.bin").write_bytes(os.urandom(64 * 1024))
        for index in range(rounds + 1):  # the first round warms both up and is dropped
            for name, executor in executors.items():
                job = JobSpec(
                    name=f"{name}-{index}",
                    argv=["python", "-c", "pass"],
                    workspace=workspace,
                    limits=LIMITS,
                )
                began = time.perf_counter()
                result = executor.run(job)
                took = time.perf_counter() - began
                if not result.ok:
                    raise RuntimeError(f"the {name} job failed: {result}")
                if index:
                    walls[name].append(took)
    return walls


def _row(name: str, walls: list[float], load: float, target: str) -> dict[str, Any]:
    return {
        "benchmark": name,
        "runs": len(walls),
        "best_s": round(min(walls), 4),
        "median_s": round(statistics.median(walls), 4),
        "load_avg": round(load, 2),
        "target": target,
    }
