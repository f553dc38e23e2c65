"""The ``Sandbox`` ABC: where untrusted harness code runs, and what a run reports.

Lifecycle: construct -> :meth:`Sandbox.prepare` (checks the host once; raises
:class:`SandboxUnavailable`) -> any number of :meth:`Sandbox.run` calls, possibly from several
threads at once -> :meth:`Sandbox.close`.

A job writes only into a *workspace*: a folder made one by :meth:`Sandbox.workspace` (kept)
or :meth:`Sandbox.scratch` (thrown away), which belongs to the user jobs run as and, where
the sandbox can, is its own size-limited filesystem (:meth:`Sandbox.disk_limits`).

A run that fails *as a job* (crash, non-zero exit, a limit hit, output too large) is not an
error: it is a :class:`RunResult` saying so. Only a sandbox that cannot start the job at all
raises (:class:`SandboxError`). Nothing a job does may harm the caller's process, the lab, or
other jobs.
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from rsilab.errors import RsilabError, UserError
from rsilab.sandbox._images import DiskLimits
from rsilab.sandbox.owners import owned_prefix, remove_tree


class SandboxError(RsilabError):
    """The sandbox could not start or supervise a job (not: the job failed)."""


class SandboxUnavailable(UserError):
    """This sandbox cannot be used on this host; the message says why, the hint what to do."""


@dataclass(frozen=True)
class Limits:
    """Limits that hold for the whole process tree of one job.

    Attributes:
        cpu_s: CPU seconds summed over every process of the job.
        memory_mb: resident memory of the whole tree.
        processes: processes and threads alive at once.
        wall_s: wall-clock seconds before the whole tree is killed.
        output_bytes: bytes kept of stdout and of stderr each; more kills the job, unless
            ``truncate_output``.
        disk_mb: MiB the job may write into its /tmp, and the size of a scratch workspace
            made for it; a kept workspace's filesystem has the size it was made with (see
            :meth:`Sandbox.workspace`). Where the sandbox cannot give a workspace its own
            filesystem, the workspace's size is polled against this limit instead.
        file_mb: the largest single file it may write.
        truncate_output: past ``output_bytes``, drop the rest of that stream and let the job
            go on (the result counts what was dropped: ``RunResult.stdout_dropped``), instead
            of killing it; for a long-running agent whose output is a log, not a result.
    """

    cpu_s: float = 120.0
    memory_mb: int = 2048
    processes: int = 128
    wall_s: float = 300.0
    output_bytes: int = 8 * 1024 * 1024
    disk_mb: int = 1024
    file_mb: int = 512
    truncate_output: bool = False


class KillReason(StrEnum):
    """Why the sandbox ended a job early: a limit, or a cancellation (``RunSpec.cancel``)."""

    WALL_TIME = "wall_time"
    CPU_TIME = "cpu_time"
    MEMORY = "memory"
    PROCESSES = "processes"
    OUTPUT = "output"
    DISK = "disk"
    CANCELLED = "cancelled"


def why_killed(reason: KillReason, limits: Limits) -> str:
    """What ending a job for ``reason`` under ``limits`` means, with the limit's value and what
    a harness can do about it, in one phrase (e.g. for ``killed: <phrase>``)."""
    mib = 1024 * 1024
    return {
        KillReason.WALL_TIME: f"it ran past its wall-clock limit of {limits.wall_s:g} s",
        KillReason.CPU_TIME: f"it used more than its {limits.cpu_s:g} CPU seconds",
        KillReason.MEMORY: f"its memory passed its limit of {limits.memory_mb} MiB",
        KillReason.PROCESSES: f"it had more than {limits.processes} processes or threads at once",
        KillReason.OUTPUT: f"it printed more than {limits.output_bytes / mib:g} MiB on stdout or "
        "stderr: print less, or write the log to a file",
        KillReason.DISK: f"it wrote more than {limits.disk_mb} MiB to its workspace or /tmp",
        KillReason.CANCELLED: "it was cancelled before it finished",
    }[reason]


@dataclass(frozen=True)
class Mount:
    """A host path made visible inside the sandbox, read-only unless ``writable``.

    ``target`` is an absolute path inside the sandbox. Only :class:`BwrapSandbox` can show a
    path elsewhere than where it is; code meant for every sandbox mounts a path at itself
    (:meth:`same`) or copies what it needs into the workspace. A writable mount must be
    a workspace of the sandbox (see :meth:`Sandbox.workspace`), like the job's own.
    """

    source: Path
    target: Path
    writable: bool = False

    @classmethod
    def same(cls, path: Path, writable: bool = False) -> Mount:
        """``path`` shown at its own location."""
        return cls(Path(path), Path(path), writable)


@dataclass(frozen=True)
class RunSpec:
    """One command to run.

    Attributes:
        argv: the command; ``argv[0]`` is looked up on the sandbox's PATH.
        workspace: host folder mounted as the job's working directory; the only writable
            place apart from a private /tmp. Unless ``read_only_workspace``, it must be (or
            lie in) a workspace of the sandbox: :meth:`Sandbox.workspace`,
            :meth:`Sandbox.scratch`.
        limits: resource limits for the whole tree.
        env: environment variables (everything else is scrubbed).
        stdin: bytes fed on standard input, then closed.
        mounts: extra read-only (or writable) host paths, e.g. a model from another job.
        threads: cores the job may use (sets OMP/MKL/torch thread variables).
        hidden: host paths that must stay invisible even where a mounted folder holds them
            (a task's raw data files); a sandbox that cannot hide them says so in its notes.
        cancel: set it (from any thread, at any time) to end the run early: see
            :meth:`Sandbox.run`. Not part of the job's description, only a handle on it.
        read_only_workspace: show the workspace read-only (the controller's predict runs on
            a read-only copy of a candidate). A sandbox that is no security boundary may
            ignore it and says so in its notes.
        on_output: called as ``on_output(fd, chunk)`` (fd 1: stdout, 2: stderr) with each
            chunk the job writes, as it arrives, from the thread supervising the run; for
            streaming a job's output to a terminal. Chunks over ``limits.output_bytes`` are
            not passed on. The result keeps its copy as usual. Not part of the job's
            description: an exception it raises ends the run (the tree is killed).
        gpus: how many GPUs the job needs (the harness's ``gpus``); an executor assigns them.
        gpu_devices: the GPUs assigned to it, as the numbers N of ``/dev/nvidiaN``; exactly
            ``gpus`` of them. A sandbox that isolates shows the job only these devices'
            nodes (see :mod:`rsilab.sandbox._gpu`); a job with too few is refused (ValueError).
    """

    argv: tuple[str, ...]
    workspace: Path
    limits: Limits = field(default_factory=Limits)
    env: dict[str, str] = field(default_factory=dict)
    stdin: bytes = b""
    mounts: tuple[Mount, ...] = ()
    threads: int = 1
    hidden: tuple[Path, ...] = ()
    cancel: threading.Event | None = None
    read_only_workspace: bool = False
    on_output: Callable[[int, bytes], None] | None = None
    gpus: int = 0
    gpu_devices: tuple[int, ...] = ()


@dataclass(frozen=True)
class RunResult:
    """What happened to one job. ``ok`` means exit code 0 and no limit hit.

    ``stdout_dropped`` and ``stderr_dropped`` count the bytes past ``Limits.output_bytes``
    that were neither kept nor passed on (the bytes read before a kill ended the job).
    """

    exit_code: int | None
    signal: int | None
    killed: KillReason | None
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    wall_s: float
    cpu_s: float
    peak_memory_mb: float
    notes: tuple[str, ...] = ()
    stdout_dropped: int = 0
    stderr_dropped: int = 0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.killed is None


class Sandbox(ABC):
    """Runs commands with limits; see the module docstring for the lifecycle."""

    name: str = "sandbox"
    is_security_boundary: bool = False

    @abstractmethod
    def prepare(self) -> None:
        """Check the host can run jobs (tools present, runtime found).

        Raises:
            SandboxUnavailable: with what is missing and how to get it.
        """

    @abstractmethod
    def run(self, spec: RunSpec) -> RunResult:
        """Run ``spec`` to completion, to a limit or to its cancellation; thread-safe.

        Cancellation: once ``spec.cancel`` is set - before the job starts or while it runs -
        the sandbox kills the job's whole process tree within about a second, as it does at a
        limit, and reports ``killed=KillReason.CANCELLED`` (a job that had already ended keeps
        its own result).

        Raises:
            SandboxError: the job could not be started or supervised.
            ValueError: the spec is invalid (argv empty, workspace missing).
        """

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release host resources (cgroups, temporary folders). Idempotent."""

    def workspace(self, folder: Path, size_mb: int | None = None) -> Path:
        """Make ``folder`` (created if missing) a workspace jobs of this sandbox may write,
        for good: idempotent, and safe to call again after a crash. Returns it resolved.
        Each call is a hold on it, which :meth:`release_workspace` ends.

        A sandbox that runs jobs as another user gives the folder and its contents to that
        user; one that can gives it its own filesystem of at least ``size_mb`` MiB (the
        sandbox's default size when None). Host code that writes there afterwards hands what
        it wrote to the folder's owner (:func:`rsilab.sandbox.hand_over`).

        Raises:
            WorkspaceRefused: the folder holds the lab or lies inside its private parts.
            OSError: the folder or its filesystem cannot be made.
        """
        made = Path(folder).resolve()
        made.mkdir(parents=True, exist_ok=True)
        return made

    def release_workspace(self, folder: Path) -> None:  # noqa: B027 - optional hook
        """End one hold on a workspace made by :meth:`workspace`; after the last, its
        contents stay in the plain folder (still the sandbox user's).

        Raises:
            OSError: its filesystem could not be taken down (a later call retries).
        """

    @contextlib.contextmanager
    def scratch(self, size_mb: int | None = None, kind: str = "scratch") -> Iterator[Path]:
        """A fresh, empty workspace (of ``size_mb`` MiB where the sandbox limits sizes),
        deleted with everything in it when the block ends; ``kind`` names its temporary
        folder (see :func:`rsilab.sandbox.owners.owned_prefix`)."""
        tmp = Path(tempfile.mkdtemp(prefix=owned_prefix(kind)))
        try:
            folder = tmp / "workspace"
            folder.mkdir()
            yield folder
        finally:
            remove_tree(tmp)  # any depth: a job may nest folders thousands deep

    def disk_limits(self) -> DiskLimits:
        """Whether the kernel bounds what a job writes into its workspace, and if not, why."""
        return DiskLimits(False, f"the {self.name} sandbox polls the workspace's size")

    @abstractmethod
    def describe(self) -> list[str]:
        """Lines for ``rsilab doctor``: what this sandbox isolates and what it does not.

        The first line names the sandbox and says whether it is a security boundary; each
        further line reads ``<property>: <yes|no|partly> - <detail>`` for the properties
        filesystem, network, user, limits, disk and cgroups.
        """

    def __enter__(self) -> Sandbox:
        self.prepare()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
