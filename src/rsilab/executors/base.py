"""The ``Executor`` ABC and the job records it speaks: :class:`JobSpec` in, :class:`JobResult` out.

Jobs cross process (and, later, machine) boundaries as JSON only: both records are pydantic
models with ``model_dump_json`` / ``model_validate_json``, never pickled. A job that fails -
a crash, a non-zero exit, a limit hit - is a :class:`JobResult` saying so, not an exception.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from enum import StrEnum
from pathlib import Path

from pydantic import ConfigDict, Field

from rsilab.errors import RsilabError
from rsilab.records import Model, Resources
from rsilab.sandbox import DiskLimits
from rsilab.sandbox.base import KillReason, Limits, Mount, RunSpec
from rsilab.sandbox.owners import owned_prefix


class JobState(StrEnum):
    """How a job ended."""

    SUCCEEDED = "succeeded"
    """Exit code 0, no limit hit."""
    FAILED = "failed"
    """Ended by itself with a non-zero exit code or a signal."""
    KILLED = "killed"
    """Ended early by the sandbox, at a limit or by :meth:`Executor.cancel`;
    ``JobResult.kill_reason`` says which (``cancelled`` for a cancellation)."""


class JobInterrupted(RsilabError):
    """The job did not end by itself: the machine or worker running it went away (a cluster
    node died, or the cluster killed its worker to save the node's memory). Its record is
    ``interrupted``, like the jobs of a process that died; the controller runs the seed again
    (:mod:`rsilab.controller.blame`).

    Attributes:
        cause: ``node_lost`` or ``cluster_oom`` (the cluster's memory monitor, not the job's
            own memory limit, which is a ``killed`` result at ``memory``).
    """

    def __init__(self, message: str, cause: str = "node_lost") -> None:
        super().__init__(message)
        self.cause = cause


class JobSpec(Model):
    """One job to run in a sandbox, as JSON (``stdin`` travels base64-encoded)."""

    model_config = ConfigDict(extra="forbid", ser_json_bytes="base64", val_json_bytes="base64")

    name: str = Field(min_length=1, max_length=200, description="Label for logs and records.")
    argv: list[str] = Field(min_length=1, description="The command; argv[0] is found on PATH.")
    workspace: Path = Field(description="Host folder mounted as the job's working directory.")
    limits: Limits = Field(default_factory=Limits, description="Limits for the whole tree.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables.")
    stdin: bytes = Field(default=b"", description="Bytes fed on standard input, then closed.")
    threads: int | None = Field(
        default=None, ge=1, description="Cores the job may use; None: the executor's share."
    )
    mounts: list[Mount] = Field(default_factory=list, description="Extra host paths shown.")
    hidden: list[Path] = Field(default_factory=list, description="Host paths kept invisible.")
    read_only_workspace: bool = Field(
        default=False, description="Show the workspace read-only (see RunSpec)."
    )
    gpus: int = Field(
        default=0, ge=0, description="GPUs the job needs; the executor assigns it its own."
    )

    def run_spec(self, threads: int) -> RunSpec:
        """The sandbox's form of this job, with ``threads`` unless the job names its own."""
        return RunSpec(
            argv=tuple(self.argv),
            workspace=self.workspace,
            limits=self.limits,
            env=dict(self.env),
            stdin=self.stdin,
            mounts=tuple(self.mounts),
            threads=self.threads or threads,
            hidden=tuple(self.hidden),
            read_only_workspace=self.read_only_workspace,
            gpus=self.gpus,
        )


class JobResult(Model):
    """What happened to one job; its logs are artifacts named by their sha256."""

    name: str = Field(description="The job's name.")
    state: JobState = Field(description="succeeded, failed or killed.")
    kill_reason: KillReason | None = Field(
        default=None, description="The limit that was hit, or 'cancelled'."
    )
    exit_code: int | None = Field(default=None, description="Exit code; None if signalled.")
    signal: int | None = Field(default=None, description="Signal that ended the main process.")
    stdout_sha256: str = Field(description="Artifact holding stdout (capped).")
    stderr_sha256: str = Field(description="Artifact holding stderr (capped).")
    stdout_bytes: int = Field(description="Bytes of stdout kept.")
    stderr_bytes: int = Field(description="Bytes of stderr kept.")
    stdout_truncated: bool = Field(default=False, description="stdout went over the cap.")
    stderr_truncated: bool = Field(default=False, description="stderr went over the cap.")
    resources: Resources = Field(description="CPU seconds, wall seconds, peak memory.")
    threads: int = Field(description="Threads the job was given.")
    sandbox: str = Field(description="Name of the sandbox that ran it.")
    security_boundary: bool = Field(description="Whether that sandbox is a security boundary.")
    notes: list[str] = Field(default_factory=list, description="What the sandbox reported.")
    started_at: str = Field(description="Start time, ISO-8601 UTC.")
    finished_at: str = Field(description="End time, ISO-8601 UTC.")

    @property
    def ok(self) -> bool:
        return self.state is JobState.SUCCEEDED


class Executor(ABC):
    """Runs jobs in sandboxes, several at once.

    Contract:
    - :meth:`submit`, :meth:`cancel` and :meth:`shutdown` are thread-safe.
    - The future of a job resolves to its :class:`JobResult` whatever the job did; one job's
      crash or limit never affects another job or the executor. It raises only when the job
      could not be run or recorded at all (see :meth:`submit`).
    - Jobs and results are JSON (pydantic); nothing is pickled, so an implementation may run
      jobs in other processes or on other machines.
    """

    @abstractmethod
    def submit(self, job: JobSpec) -> Future[JobResult]:
        """Queue ``job``; returns at once.

        Raises:
            RuntimeError: the executor was shut down.

        The future raises:
            JobInterrupted: the machine running the job went away before it ended (only
                executors that run jobs on other machines).
            SandboxError: the sandbox could not start or supervise the job.
            ValueError: the job is invalid for this sandbox (missing workspace, bad mount).
            LabError: the job's logs could not be stored.
        """

    @abstractmethod
    def cancel(self, name: str) -> bool:
        """End every job submitted under ``name`` that has not finished yet.

        A queued job never starts; a running one has its whole process tree killed by the
        sandbox within about a second. Either way its future still resolves to a
        :class:`JobResult`: state ``KILLED``, ``kill_reason`` ``cancelled`` (a job that ended by
        itself first keeps its own result). Returns False when no job of that name is queued
        or running in this executor (an unknown name, a finished job, or one another process
        runs); never raises for that.
        """

    @abstractmethod
    def shutdown(self, wait: bool = True, cancel_pending: bool = False) -> None:
        """Stop taking jobs. ``wait``: block until running jobs end. ``cancel_pending``:
        drop queued jobs (their futures are cancelled). Idempotent."""

    @property
    @abstractmethod
    def slots(self) -> int:
        """How many jobs run at once."""

    def workspace(self, folder: Path, size_mb: int | None = None) -> Path:
        """Make ``folder`` a workspace its jobs may write, for good (see
        :meth:`rsilab.sandbox.Sandbox.workspace`); this default only creates the folder.

        Raises:
            WorkspaceRefused: the folder holds the lab or lies inside its private parts.
            OSError: the folder or its filesystem cannot be made.
        """
        made = Path(folder).resolve()
        made.mkdir(parents=True, exist_ok=True)
        return made

    def disk_limits(self) -> DiskLimits:
        """Whether the kernel bounds what its jobs write into a workspace, and if not, why
        (see :meth:`rsilab.sandbox.Sandbox.disk_limits`)."""
        return DiskLimits(False, f"{type(self).__name__} does not say how it bounds disk use")

    def release_workspace(self, folder: Path) -> None:  # noqa: B027 - optional hook
        """End this process's use of a workspace made by :meth:`workspace` (see
        :meth:`rsilab.sandbox.Sandbox.release_workspace`)."""

    @contextlib.contextmanager
    def scratch(self, size_mb: int | None = None, kind: str = "scratch") -> Iterator[Path]:
        """A fresh, empty workspace for this executor's jobs, deleted afterwards (see
        :meth:`rsilab.sandbox.Sandbox.scratch`); this default is a temporary folder."""
        tmp = Path(tempfile.mkdtemp(prefix=owned_prefix(kind)))
        try:
            folder = tmp / "workspace"
            folder.mkdir()
            yield folder
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def run(self, job: JobSpec) -> JobResult:
        """Submit ``job`` and wait for its result (raises what its future raises)."""
        return self.submit(job).result()

    def run_all(self, jobs: Iterable[JobSpec]) -> list[JobResult]:
        """Submit every job, then wait for all; results in the order given."""
        futures = [self.submit(job) for job in jobs]
        return [future.result() for future in futures]

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown(wait=True)
