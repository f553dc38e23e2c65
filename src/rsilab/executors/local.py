"""``LocalExecutor``: jobs in a fixed number of slots on this machine.

Each slot is a thread that hands one job at a time to the sandbox and waits for it; the job
itself runs in its own process tree, so the slots are cheap and a job cannot touch the
executor. Each job gets ``cores // slots`` threads (at least one) so jobs do not fight over the
cores; the sandbox passes that on as OMP/MKL/OpenBLAS/torch thread variables.

Cancellation: every submitted job gets a ``threading.Event``, kept under its name while it is
queued or running. :meth:`LocalExecutor.cancel` sets it; a queued job then returns a cancelled
result without starting, and a running one is killed by the sandbox (``RunSpec.cancel``).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from rsilab.executors._gpu import with_gpu_use
from rsilab.executors.base import Executor, JobResult, JobSpec, JobState
from rsilab.records import Resources, utc_now
from rsilab.sandbox import DiskLimits, host_gpus
from rsilab.sandbox.base import KillReason, RunResult, Sandbox
from rsilab.store.artifacts import ArtifactStore


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class LocalExecutor(Executor):
    """Runs jobs through ``sandbox`` in ``slots`` parallel slots; logs go to ``artifacts``.

    The sandbox is prepared on construction (raising ``SandboxUnavailable`` if it cannot be
    used) and is not closed by :meth:`shutdown`: its owner closes it.
    """

    def __init__(self, sandbox: Sandbox, artifacts: ArtifactStore, slots: int = 1) -> None:
        if slots < 1:
            raise ValueError("slots must be at least 1")
        sandbox.prepare()
        self.sandbox = sandbox
        self.artifacts = artifacts
        self._slots = slots
        self.threads_per_job = max(1, available_cores() // slots)
        self._pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="rsilab-job")
        self._lock = threading.Lock()
        self._cancels: dict[str, list[threading.Event]] = {}
        self._gpus = host_gpus()  # each GPU job gets GPUs no running job holds

    @property
    def slots(self) -> int:
        return self._slots

    def workspace(self, folder: Path, size_mb: int | None = None) -> Path:
        return self.sandbox.workspace(folder, size_mb)

    def release_workspace(self, folder: Path) -> None:
        self.sandbox.release_workspace(folder)

    def disk_limits(self) -> DiskLimits:
        return self.sandbox.disk_limits()

    @contextlib.contextmanager
    def scratch(self, size_mb: int | None = None, kind: str = "scratch") -> Iterator[Path]:
        with self.sandbox.scratch(size_mb, kind) as folder:
            yield folder

    def submit(self, job: JobSpec) -> Future[JobResult]:
        cancel = threading.Event()
        with self._lock:
            self._cancels.setdefault(job.name, []).append(cancel)
        try:
            return self._pool.submit(self._execute, job, cancel)
        except BaseException:
            self._forget(job.name, cancel)
            raise

    def cancel(self, name: str) -> bool:
        with self._lock:
            pending = list(self._cancels.get(name, ()))
        for event in pending:
            event.set()
        return bool(pending)

    def shutdown(self, wait: bool = True, cancel_pending: bool = False) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=cancel_pending)
        if cancel_pending:
            with self._lock:  # dropped futures never reach _execute to forget themselves
                self._cancels.clear()

    def _forget(self, name: str, cancel: threading.Event) -> None:
        with self._lock:
            events = self._cancels.get(name, [])
            if cancel in events:
                events.remove(cancel)
            if not events:
                self._cancels.pop(name, None)

    def _execute(self, job: JobSpec, cancel: threading.Event) -> JobResult:
        try:
            return self._run(job, cancel)
        finally:
            self._forget(job.name, cancel)

    def _run(self, job: JobSpec, cancel: threading.Event) -> JobResult:
        started_at = utc_now()
        spec = replace(job.run_spec(self.threads_per_job), cancel=cancel)
        # Cancelled while queued or waiting for GPUs: never start it.
        result, gpu = self._gpus.run(self.sandbox, spec)
        done = self._result(job, spec.threads, started_at, result or _NEVER_STARTED)
        return with_gpu_use(done, gpu)

    def _result(self, job: JobSpec, threads: int, started_at: str, result: RunResult) -> JobResult:
        stdout = self.artifacts.put_bytes(result.stdout)
        stderr = self.artifacts.put_bytes(result.stderr)
        return JobResult(
            name=job.name,
            state=_state(result),
            kill_reason=result.killed,
            exit_code=result.exit_code,
            signal=result.signal,
            stdout_sha256=stdout.sha256,
            stderr_sha256=stderr.sha256,
            stdout_bytes=stdout.size,
            stderr_bytes=stderr.size,
            stdout_truncated=result.stdout_truncated,
            stderr_truncated=result.stderr_truncated,
            resources=Resources(
                cpu_s=result.cpu_s, wall_s=result.wall_s, peak_rss_mb=result.peak_memory_mb
            ),
            threads=threads,
            sandbox=self.sandbox.name,
            security_boundary=self.sandbox.is_security_boundary,
            notes=list(result.notes),
            started_at=started_at,
            finished_at=utc_now(),
        )


_NEVER_STARTED = RunResult(
    exit_code=None,
    signal=None,
    killed=KillReason.CANCELLED,
    stdout=b"",
    stderr=b"",
    stdout_truncated=False,
    stderr_truncated=False,
    wall_s=0.0,
    cpu_s=0.0,
    peak_memory_mb=0.0,
    notes=("cancelled before it started",),
)


def _state(result: RunResult) -> JobState:
    if result.killed is not None:
        return JobState.KILLED
    return JobState.SUCCEEDED if result.ok else JobState.FAILED
