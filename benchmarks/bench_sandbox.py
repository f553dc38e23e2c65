"""Sandbox overhead on a 5 s CPU-bound job, over a bare subprocess.

The job is a pure-Python loop calibrated to about 5 s. In one run, the bare subprocess (the
runtime's own python, no sandbox, with an environment like the sandboxes give, since the
environment's size alone shifts a Python loop's speed by a few per cent), ProcessSandbox and
BwrapSandbox take turns. Wall time is measured around the whole call (setup, supervision,
cleanup); ``ratio_over_bare`` uses the best run of each, which other load disturbs least.

Other load on a small machine moves these ratios by more than the sandbox does, so two
figures that load hardly touches are measured too: the extra start-and-stop time of a trivial
job (median of several), and the CPU time the supervising thread spends during the 5 s job.
``intrinsic_ratio`` is 1 + (extra start-up + supervisor CPU) / bare best.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rsilab.sandbox import BwrapSandbox, Limits, ProcessSandbox, RunSpec, Sandbox
from rsilab.sandbox._common import job_env
from rsilab.sandbox.base import SandboxUnavailable
from rsilab.sandbox.runtime import current_runtime

TARGET_S = 5.0
LOOP = "n = 0\nfor i in range({n}):\n    n += i\n"
LIMITS = Limits(cpu_s=120, wall_s=120)
Runner = Callable[[str], tuple[float, float]]
"""Runs code; returns (wall seconds, CPU seconds this thread spent supervising)."""


def _thread_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_THREAD)
    return usage.ru_utime + usage.ru_stime


def _bare(python: str, workspace: Path) -> Runner:
    spec = RunSpec(argv=("python",), workspace=workspace)
    env = job_env(spec, path=f"{Path(python).parent}:/usr/bin:/bin", home=str(workspace))

    def run(code: str) -> tuple[float, float]:
        started, cpu = time.perf_counter(), _thread_cpu()
        argv = [python, "-c", code]
        subprocess.run(argv, check=True, capture_output=True, env=env, cwd=workspace)
        return time.perf_counter() - started, _thread_cpu() - cpu

    return run


def _sandboxed(sandbox: Sandbox, workspace: Path) -> Runner:
    def run(code: str) -> tuple[float, float]:
        # read-only: the jobs write nothing, and a plain folder is no workspace of a sandbox
        spec = RunSpec(("python", "-c", code), workspace, LIMITS, read_only_workspace=True)
        started, cpu = time.perf_counter(), _thread_cpu()
        result = sandbox.run(spec)
        elapsed, used = time.perf_counter() - started, _thread_cpu() - cpu
        if not result.ok:
            raise RuntimeError(f"{sandbox.name} job failed: {result}")
        return elapsed, used

    return run


def _calibrate(bare: Runner) -> str:
    """The loop that takes about TARGET_S in a bare subprocess."""
    n = 2_000_000
    while True:
        took = bare(LOOP.format(n=n))[0]
        if took > 0.5:
            return LOOP.format(n=int(n * TARGET_S / took))
        n *= 4


def _sandboxes() -> tuple[list[Sandbox], str]:
    sandboxes: list[Sandbox] = [ProcessSandbox()]
    try:
        bwrap = BwrapSandbox()
        bwrap.prepare()
        sandboxes.append(bwrap)
    except SandboxUnavailable as exc:
        return sandboxes, str(exc)
    return sandboxes, ""


def run(quick: bool) -> list[dict[str, Any]]:
    """One row per sandbox: best and median seconds, ratios over the bare run, and the
    load-independent overhead figures."""
    runtime = current_runtime()
    python = str(runtime.python) if runtime.is_installed() else "python3"
    sandboxes, skipped = _sandboxes()
    rounds, trivial_rounds = (1, 5) if quick else (5, 15)
    jobs: dict[str, list[tuple[float, float]]] = {}
    starts: dict[str, list[float]] = {}
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        runners = {"bare subprocess": _bare(python, Path(tmp))}
        runners.update({s.name: _sandboxed(s, Path(tmp)) for s in sandboxes})
        code = _calibrate(runners["bare subprocess"])
        for _ in range(trivial_rounds):
            for name, runner in runners.items():
                starts.setdefault(name, []).append(runner("pass")[0])
        for _ in range(rounds):
            for name, runner in runners.items():  # interleaved, so drift hits all alike
                jobs.setdefault(name, []).append(runner(code))
    load = max(load, os.getloadavg()[0])
    rows = [_row(name, jobs, starts, load) for name in runners]
    if skipped:
        rows.append({"benchmark": "5 s CPU job, bwrap", "note": f"not measured: {skipped}"})
    for sandbox in sandboxes:
        sandbox.close()
    return rows


def _row(
    name: str,
    jobs: dict[str, list[tuple[float, float]]],
    starts: dict[str, list[float]],
    load: float,
) -> dict[str, Any]:
    walls = [wall for wall, _ in jobs[name]]
    bare = [wall for wall, _ in jobs["bare subprocess"]]
    extra_start = statistics.median(starts[name]) - statistics.median(starts["bare subprocess"])
    supervisor = statistics.median(cpu for _, cpu in jobs[name])
    return {
        "benchmark": f"5 s CPU job, {name}",
        "runs": len(walls),
        "best_s": round(min(walls), 3),
        "median_s": round(statistics.median(walls), 3),
        "ratio_over_bare": round(min(walls) / min(bare), 4),
        "median_ratio": round(statistics.median(walls) / statistics.median(bare), 4),
        "extra_start_s": round(extra_start, 4),
        "supervisor_cpu_s": round(supervisor, 4),
        "intrinsic_ratio": round(1 + (extra_start + supervisor) / min(bare), 4),
        "load_avg": round(load, 2),
        "target": "reference" if name == "bare subprocess" else "<= 1.05",
    }
