"""``ProcessSandbox``: a plain subprocess with rlimits and a scrubbed environment.

It is NOT a security boundary: the job runs as the calling user, sees the whole filesystem
that user can read (the lab, rsilab's source, every task's data), can write wherever that user
can, and can reach the network. It exists so rsilab works where bubblewrap does not; the limits
keep honest mistakes (a runaway loop, a huge allocation, endless output) from hurting the host.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rsilab.sandbox._common import (
    DiskWatch,
    decode_status,
    job_env,
    kill_reason_of_signal,
    peak_rss_mb,
    processes_of,
    rlimit_args,
    validate,
)
from rsilab.sandbox._gpu import visible_env
from rsilab.sandbox._job_start import JOB_UMASK, default_signals_tool, with_default_signals
from rsilab.sandbox._supervise import Watch, supervise
from rsilab.sandbox._tree import TreeSampler, tree_pids
from rsilab.sandbox.base import KillReason, RunResult, RunSpec, Sandbox, SandboxError
from rsilab.sandbox.owners import owned_prefix, remove_tree
from rsilab.sandbox.runtime import Runtime, current_runtime


class ProcessSandbox(Sandbox):
    """Runs jobs as subprocesses of the calling user; see the module docstring.

    Jobs get: a new session (so the whole process group can be killed), the workspace as
    working directory, a private temporary HOME/TMPDIR, an environment holding only PATH,
    HOME, TMPDIR, LANG, the thread variables and ``spec.env``, and rlimits (core 0, file
    size, open files, CPU seconds and data size per process; processes per user unless root,
    whom that limit does not bind). Peak memory is the larger of the main process's own
    high-water mark and the tree's sampled resident size; CPU time covers the processes the
    main process waited for, or the sampled tree if that is more. PATH starts with the
    runtime venv when it is installed, else with the folder of the current Python.
    """

    name = "process"
    is_security_boundary = False

    def __init__(self, runtime: Runtime | None = None) -> None:
        self.runtime = runtime or current_runtime()
        self._prlimit = shutil.which("prlimit")

    def prepare(self) -> None:
        """Check that jobs can start with default signal handling (:mod:`._job_start`).

        Raises:
            SandboxUnavailable: they cannot.
        """
        default_signals_tool()

    def _path(self) -> str:
        first = self.runtime.bin_dir if self.runtime.is_installed() else Path(sys.executable).parent
        return f"{first}:/usr/local/bin:/usr/bin:/bin"

    def _notes(self, spec: RunSpec) -> list[str]:
        notes = ["process sandbox: not a security boundary (no filesystem or network isolation)"]
        if not self._prlimit:
            notes.append("prlimit not found: no rlimits were applied")
        if spec.hidden:
            notes.append("process sandbox cannot hide paths; spec.hidden was not enforced")
        if spec.read_only_workspace:
            notes.append("process sandbox cannot mount read-only; the workspace was writable")
        return notes

    def run(self, spec: RunSpec) -> RunResult:
        workspace = validate(spec)
        for mount in spec.mounts:
            if Path(mount.source).resolve() != Path(mount.target):
                raise ValueError(
                    f"the process sandbox shows files only where they are: mount {mount.source} "
                    f"at itself (Mount.same) instead of at {mount.target}"
                )
        home = Path(tempfile.mkdtemp(prefix=owned_prefix("job-home")))
        try:
            return self._run(spec, workspace, home)
        finally:
            remove_tree(home)  # any depth: a job may nest folders thousands deep

    def _argv(self, spec: RunSpec) -> list[str]:
        if not self._prlimit:
            return with_default_signals(list(spec.argv))
        nproc = None if os.geteuid() == 0 else processes_of(os.getuid()) + spec.limits.processes
        limits = rlimit_args(spec.limits, per_process=True, nproc=nproc)
        return with_default_signals([self._prlimit, *limits, "--", *spec.argv])

    def _run(self, spec: RunSpec, workspace: Path, home: Path) -> RunResult:
        env = job_env(spec, path=self._path(), home=str(home)) | visible_env(spec)
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                self._argv(spec),
                cwd=workspace,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                umask=JOB_UMASK,  # whatever umask rsilab was started with
                close_fds=True,
            )
        except OSError as exc:
            raise SandboxError(f"cannot start {spec.argv[0]!r}: {exc.strerror or exc}") from exc

        def kill() -> None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)

        disk = DiskWatch(workspace, spec.limits)
        tree = TreeSampler(proc.pid)
        peak = [0.0]

        def check() -> KillReason | None:
            # wait4's ru_maxrss would include rsilab's own size from before exec: sample the
            # main process's high-water mark and the whole tree's resident size instead.
            peak[0] = max(peak[0], peak_rss_mb(proc.pid))
            tree.sample()
            return KillReason.DISK if disk.over() else None

        watch = Watch(check=check, kill=kill, pids=lambda: tree_pids(proc.pid))
        seen = supervise(proc, spec.stdin, spec.limits, watch, started, spec.cancel, spec.on_output)
        exit_code, sig = decode_status(seen.returncode)
        killed = seen.killed or kill_reason_of_signal(sig)
        if killed is None and sig == signal.SIGKILL and seen.rusage_cpu_s >= spec.limits.cpu_s:
            killed = KillReason.CPU_TIME  # the hard CPU rlimit sends SIGKILL
        return seen.result(
            exit_code=exit_code,
            signal=sig,
            killed=killed,
            cpu_s=max(seen.rusage_cpu_s, tree.cpu_s),
            peak_memory_mb=max(peak[0], tree.peak_mb),
            notes=self._notes(spec) + seen.notes,
        )

    def describe(self) -> list[str]:
        return [
            "process sandbox: NOT a security boundary",
            "filesystem: no - the job reads everything the user can (the lab, rsilab's source, "
            "task data) and writes wherever the user can",
            "network: no - the job can reach the network and services on 127.0.0.1",
            f"user: no - the job runs as uid {os.getuid()}, like rsilab itself",
            "limits: rlimits per process (CPU seconds, data size, file size); wall time, output "
            "size and workspace size for the whole process group"
            + ("" if self._prlimit else " (prlimit missing: no rlimits)"),
            "disk: no - the workspace's size is polled; a fast writer (fallocate) overshoots it",
            "cgroups: no - a process that leaves its process group escapes the wall-time kill",
        ]
