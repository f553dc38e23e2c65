"""``RayExecutor``: every job a Ray task, run in bubblewrap on the node that takes it.

Each job becomes one Ray task that asks for what the job needs - its threads as CPUs, its
memory limit as Ray ``memory``, and the executor's GPUs and custom resources per job - so Ray
places it on a node with room. On that node it runs in the node's own bubblewrap sandbox
(:mod:`._ray_node`), with the same limits as on this machine.

Data moves as bytes sent explicitly (:mod:`._ray_bundle`): the job's workspace and read-only
mounts go to the node as a tar in the task's arguments; what the job changed comes back as a
tar in its result and is applied to the workspace here, where the artifact store takes the
model and logs as for any job. Nothing stays in Ray's object store once the task is done;
jobs and results cross as JSON text and bytes, never as pickled rsilab objects.

Tasks run with ``max_retries=0``: Ray never runs a job twice on its own. When the node or
worker running a job dies, or Ray's memory monitor kills the worker because the node as a
whole ran short of memory, the job's future raises :class:`JobInterrupted` (``cause``
``node_lost`` or ``cluster_oom``); its record becomes ``interrupted`` and rsilab's recovery
re-runs the work. A job over its *own* memory limit is killed by its sandbox on the node and
is a ``killed`` result at ``memory``, as everywhere else.

Connection and preflight (token authentication, the same environment on every node,
bubblewrap on every node): :mod:`._ray_cluster`.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rsilab.executors._ray_bundle import (
    WORKSPACE,
    apply_deletions,
    deleted_paths,
    pack_inputs,
    safe_unpack,
)
from rsilab.executors._ray_cluster import Cluster, connect
from rsilab.executors._ray_node import describe, run_job
from rsilab.executors.base import Executor, JobInterrupted, JobResult, JobSpec, JobState
from rsilab.records import Resources, utc_now
from rsilab.sandbox import BwrapSandbox, DiskLimits, SandboxUnavailable, current_runtime, hand_over
from rsilab.sandbox.base import KillReason, Sandbox, SandboxError
from rsilab.store.artifacts import ArtifactStore

_MIB = 1024 * 1024
_CANCELLED_NOTE = "cancelled before it finished on its Ray node; its workspace is as it was"


class RayExecutor(Executor):
    """Runs jobs as Ray tasks on a cluster; see the module for the mechanism.

    Args:
        sandbox: this machine's sandbox, prepared here; it makes the workspaces (which live
            on this machine) and must be bubblewrap, as every node's is. Its runtime (the
            base one, or a task's own) is the one every node is checked for and runs jobs in.
        artifacts: where logs go.
        address: ``HOST:PORT`` of the cluster's GCS; None starts a cluster on this machine
            (loopback, a fresh token) that lives as long as the executor.
        slots: jobs in flight at once (default: the cluster's CPUs, at least 1).
        num_cpus: CPUs of a cluster started here (default: all of this machine's).
        gpus_per_job: GPUs each job asks for.
        resources: custom Ray resources each job asks for (e.g. ``{"gpu-node": 1}``).

    Raises:
        SandboxUnavailable: ``sandbox`` is not bubblewrap or cannot be used.
        UserError: the cluster is refused (see :func:`._ray_cluster.connect`).
    """

    def __init__(
        self,
        sandbox: Sandbox,
        artifacts: ArtifactStore,
        *,
        address: str | None = None,
        slots: int | None = None,
        num_cpus: int | None = None,
        gpus_per_job: float = 0.0,
        resources: Mapping[str, float] | None = None,
    ) -> None:
        if not sandbox.is_security_boundary:
            raise SandboxUnavailable(
                f"the Ray executor runs jobs in bubblewrap on every node, not in the "
                f"{sandbox.name} sandbox",
                "install bubblewrap (`make system-deps` as root), or use --executor local",
            )
        sandbox.prepare()
        self.sandbox = sandbox
        self.artifacts = artifacts
        self.gpus_per_job = gpus_per_job
        self.resources = dict(resources or {})
        runtime = sandbox.runtime if isinstance(sandbox, BwrapSandbox) else current_runtime()
        self.shown = sandbox.shown if isinstance(sandbox, BwrapSandbox) else ()
        """Host paths every node's sandbox shows its jobs read-only (a task's local model)."""
        self.runtime = describe(runtime, self.shown)
        """The descriptor of the runtime jobs run in on every node (see ``_ray_node``)."""
        self.cluster: Cluster = connect(address, num_cpus=num_cpus, runtime=self.runtime)
        self._slots = slots or max(1, int(self.cluster.cpus))
        self._pool = ThreadPoolExecutor(max_workers=self._slots, thread_name_prefix="rsilab-ray")
        self._lock = threading.Lock()
        self._running: dict[str, list[_Handle]] = {}
        self._closed = False
        import ray

        self._remote = ray.remote(run_job)

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
        if any(m.writable for m in job.mounts):
            raise ValueError(
                f"job {job.name}: the Ray executor sends mounts to nodes as read-only copies; "
                "a writable mount cannot be written back"
            )
        if job.gpus:  # nodes do not assign GPUs yet: refused, never run without its own GPUs
            raise ValueError(
                f"job {job.name}: the Ray executor does not assign GPUs yet; run GPU tasks "
                "with the local executor (--executor local)"
            )
        handle = _Handle()
        with self._lock:
            if self._closed:
                raise RuntimeError("the Ray executor was shut down")
            self._running.setdefault(job.name, []).append(handle)
        try:
            return self._pool.submit(self._execute, job, handle)
        except BaseException:
            self._forget(job.name, handle)
            raise

    def cancel(self, name: str) -> bool:
        import ray

        with self._lock:
            handles = list(self._running.get(name, ()))
        for handle in handles:
            ref = handle.cancel()
            if ref is not None:
                with contextlib.suppress(Exception):  # already finished: nothing to cancel
                    ray.cancel(ref, force=False)
        return bool(handles)

    def shutdown(self, wait: bool = True, cancel_pending: bool = False) -> None:
        with self._lock:
            first, self._closed = not self._closed, True
        self._pool.shutdown(wait=wait, cancel_futures=cancel_pending)
        if first and wait:
            self.cluster.close()

    def _forget(self, name: str, handle: _Handle) -> None:
        with self._lock:
            handles = self._running.get(name, [])
            if handle in handles:
                handles.remove(handle)
            if not handles:
                self._running.pop(name, None)

    def _execute(self, job: JobSpec, handle: _Handle) -> JobResult:
        try:
            return self._run(job, handle)
        finally:
            self._forget(job.name, handle)

    def _run(self, job: JobSpec, handle: _Handle) -> JobResult:
        import ray

        started_at = utc_now()
        threads = job.threads or 1  # the CPUs it asks Ray for
        if handle.cancelled:  # cancelled while queued here: never sent
            return self._cancelled(job, threads, started_at)
        workspace = Path(job.workspace).resolve()
        if not workspace.is_dir():
            raise ValueError(f"workspace {job.workspace} is not a folder")
        sources = [Path(m.source) for m in job.mounts]
        inputs = pack_inputs(workspace, sources, [*job.hidden, *self._hidden()])
        ref = self._remote.options(
            num_cpus=threads,
            memory=job.limits.memory_mb * _MIB,
            num_gpus=self.gpus_per_job,
            resources=self.resources,
            max_retries=0,
            name=f"rsilab:{job.name}",
        ).remote(job.model_dump_json(), threads, inputs, self.runtime)
        if not handle.started(ref):  # cancelled while its inputs were packed
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=False)
        try:
            fields_json, stdout, stderr, changes = ray.get(ref)
        except Exception as exc:
            if handle.cancelled and _is_cancellation(exc):
                return self._cancelled(job, threads, started_at)
            raise _translate(job, exc) from exc
        fields = json.loads(fields_json)
        notes = list(fields.get("notes", []))
        notes.append(f"ran on Ray node {fields.get('node')}")
        if changes and not job.read_only_workspace:
            notes += _apply(workspace, changes)
        return self._result(job, threads, started_at, fields, stdout, stderr, notes)

    def _hidden(self) -> tuple[Path, ...]:
        """What this machine's sandbox hides from every job (never sent to a node)."""
        return tuple(getattr(self.sandbox, "hidden", ()))

    def _cancelled(self, job: JobSpec, threads: int, started_at: str) -> JobResult:
        fields = {"killed": str(KillReason.CANCELLED), "exit_code": None, "signal": None}
        return self._result(job, threads, started_at, fields, b"", b"", [_CANCELLED_NOTE])

    def _result(
        self,
        job: JobSpec,
        threads: int,
        started_at: str,
        fields: dict[str, Any],
        stdout: bytes,
        stderr: bytes,
        notes: list[str],
    ) -> JobResult:
        out = self.artifacts.put_bytes(stdout)
        err = self.artifacts.put_bytes(stderr)
        killed = KillReason(fields["killed"]) if fields.get("killed") else None
        exit_code = fields.get("exit_code")
        state = JobState.KILLED if killed else JobState.SUCCEEDED
        if killed is None and exit_code != 0:
            state = JobState.FAILED
        return JobResult(
            name=job.name,
            state=state,
            kill_reason=killed,
            exit_code=exit_code,
            signal=fields.get("signal"),
            stdout_sha256=out.sha256,
            stderr_sha256=err.sha256,
            stdout_bytes=out.size,
            stderr_bytes=err.size,
            stdout_truncated=bool(fields.get("stdout_truncated")),
            stderr_truncated=bool(fields.get("stderr_truncated")),
            resources=Resources(
                cpu_s=float(fields.get("cpu_s", 0.0)),
                wall_s=float(fields.get("wall_s", 0.0)),
                peak_rss_mb=float(fields.get("peak_memory_mb", 0.0)),
            ),
            threads=threads,
            sandbox=self.sandbox.name,
            security_boundary=self.sandbox.is_security_boundary,
            notes=notes,
            started_at=started_at,
            finished_at=utc_now(),
        )


class _Handle:
    """One submitted job's Ray task and whether it was asked to stop (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ref: Any = None
        self.cancelled = False

    def started(self, ref: Any) -> bool:
        """Remember the task; False when the job was cancelled before it existed."""
        with self._lock:
            self.ref = ref
            return not self.cancelled

    def cancel(self) -> Any:
        """Mark the job cancelled; its task, if it has one yet."""
        with self._lock:
            self.cancelled = True
            return self.ref


def _apply(workspace: Path, changes: bytes) -> list[str]:
    """Apply what a job changed (deletions, then new and changed paths) to ``workspace``;
    what was written goes to the workspace's owner. Notes on anything refused."""
    apply_deletions(workspace, deleted_paths(changes))
    written, notes = safe_unpack(changes, workspace, WORKSPACE)
    hand_over(workspace, *(workspace / p for p in written))
    return notes


def _is_cancellation(exc: BaseException) -> bool:
    from ray.exceptions import TaskCancelledError

    return isinstance(exc, TaskCancelledError)


def _translate(job: JobSpec, exc: BaseException) -> BaseException:
    """The executor's error for a Ray error (see :meth:`Executor.submit`)."""
    from ray import exceptions as rex

    if isinstance(exc, rex.OutOfMemoryError):
        return JobInterrupted(
            f"job {job.name}: Ray's memory monitor killed its worker because the node as a "
            f"whole ran short of memory; this is not the job's own limit "
            f"({job.limits.memory_mb} MiB), at which the sandbox would have killed it",
            cause="cluster_oom",
        )
    lost = (
        rex.NodeDiedError,
        rex.WorkerCrashedError,
        rex.LocalRayletDiedError,
        rex.ObjectLostError,
        rex.RaySystemError,
    )
    if isinstance(exc, lost):
        return JobInterrupted(
            f"job {job.name}: the Ray node or worker running it went away before it ended "
            f"({type(exc).__name__})"
        )
    if isinstance(exc, rex.RayTaskError):
        cause = exc.cause
        if isinstance(cause, SandboxError | ValueError | SandboxUnavailable):
            return cause
        return SandboxError(f"job {job.name} failed on its Ray node: {cause!r}")
    return SandboxError(f"job {job.name} could not run on the Ray cluster: {exc!r}")
