"""Sandbox overhead on a 5 s CPU-bound job, over a bare subprocess.

The job is a pure-Python loop calibrated to about 5 s. In one run, the bare subprocess (the
runtime's own python, no sandbox), ProcessSandbox and BwrapSandbox take turns, and each
sandbox's median wall time (measured around the whole call: setup, supervision, cleanup) is
divided by the bare median.
"""

from __future__ import annotations

import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rsilab.sandbox import BwrapSandbox, Limits, ProcessSandbox, RunSpec, Sandbox
from rsilab.sandbox.base import SandboxUnavailable
from rsilab.sandbox.runtime import current_runtime

TARGET_S = 5.0
LOOP = "n = 0\nfor i in range({n}):\n    n += i\n"
LIMITS = Limits(cpu_s=120, wall_s=120)


def _bare(python: str, code: str) -> float:
    started = time.perf_counter()
    subprocess.run([python, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - started


def _sandboxed(sandbox: Sandbox, code: str, workspace: Path) -> float:
    started = time.perf_counter()
    result = sandbox.run(RunSpec(argv=("python", "-c", code), workspace=workspace, limits=LIMITS))
    elapsed = time.perf_counter() - started
    if not result.ok:
        raise RuntimeError(f"{sandbox.name} job failed: {result}")
    return elapsed


def _calibrate(python: str) -> int:
    """Loop count that takes about TARGET_S in a bare subprocess."""
    n = 2_000_000
    while True:
        took = _bare(python, LOOP.format(n=n))
        if took > 0.5:
            return int(n * TARGET_S / took)
        n *= 4


def run(quick: bool) -> list[dict[str, Any]]:
    """One row per sandbox: median seconds and the ratio over the bare subprocess."""
    runtime = current_runtime()
    python = str(runtime.python) if runtime.is_installed() else "python3"
    code = LOOP.format(n=_calibrate(python))
    sandboxes: list[Sandbox] = [ProcessSandbox()]
    skipped = ""
    try:
        bwrap = BwrapSandbox()
        bwrap.prepare()
        sandboxes.append(bwrap)
    except SandboxUnavailable as exc:
        skipped = str(exc)
    rounds = 1 if quick else 5
    times: dict[str, list[float]] = {"bare subprocess": []}
    with tempfile.TemporaryDirectory() as tmp:
        runners: dict[str, Callable[[], float]] = {"bare subprocess": lambda: _bare(python, code)}
        for sandbox in sandboxes:
            runners[sandbox.name] = lambda s=sandbox: _sandboxed(s, code, Path(tmp))  # type: ignore[misc]
        for _ in range(rounds):
            for name, runner in runners.items():  # interleaved, so drift hits all alike
                times.setdefault(name, []).append(runner())
    bare = statistics.median(times["bare subprocess"])
    rows = [_row(name, runs, bare) for name, runs in times.items()]
    if skipped:
        rows.append({"benchmark": "bwrap", "note": f"not measured: {skipped}"})
    for sandbox in sandboxes:
        sandbox.close()
    return rows


def _row(name: str, runs: list[float], bare: float) -> dict[str, Any]:
    median = statistics.median(runs)
    return {
        "benchmark": f"5 s CPU job, {name}",
        "runs": len(runs),
        "median_s": round(median, 3),
        "ratio_over_bare": round(median / bare, 4),
        "target": "reference" if name == "bare subprocess" else "<= 1.05",
    }
