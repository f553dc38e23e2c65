"""How a bubblewrap job is watched while it runs and reported once it ends: through its
cgroups where it has them, else by sampling its process tree; killed as a whole."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

from rsilab.sandbox import _cgroup
from rsilab.sandbox._common import DiskWatch, decode_status, kill_reason_of_signal
from rsilab.sandbox._supervise import Supervised, Watch
from rsilab.sandbox._tree import TreeSampler, tree_pids
from rsilab.sandbox.base import KillReason, RunResult, RunSpec

NO_CGROUP_NOTE = "no cgroups: limits hold per process (rlimits), not for the whole tree"


def make_watch(
    proc: subprocess.Popen[bytes],
    spec: RunSpec,
    workspace: Path,
    cgroup: _cgroup.JobCgroup | None,
    tree: TreeSampler | None,
    poll_disk: bool,
) -> Watch:
    """The limit checks and the kill of one job; ``poll_disk`` when its workspace's size is
    no kernel limit (then it is polled against ``spec.limits.disk_mb``)."""
    disk = DiskWatch(workspace, spec.limits) if poll_disk else None

    def disk_over() -> KillReason | None:
        return KillReason.DISK if disk is not None and disk.over() else None

    def kill_group() -> None:
        # Killing bwrap kills the job's pid namespace (--die-with-parent on its init).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)

    if cgroup is None:
        assert tree is not None

        def sample() -> KillReason | None:
            tree.sample()
            return disk_over()

        return Watch(check=sample, kill=kill_group, pids=lambda: tree_pids(proc.pid))

    def check() -> KillReason | None:
        if cgroup.oom_kills():
            return KillReason.MEMORY
        if cgroup.fork_failures():
            return KillReason.PROCESSES
        if cgroup.cpu_s() > spec.limits.cpu_s:
            return KillReason.CPU_TIME
        return disk_over()

    def kill() -> None:
        cgroup.kill_all()
        kill_group()

    return Watch(check=check, kill=kill, pids=cgroup.pids)


def job_result(
    seen: Supervised,
    cgroup: _cgroup.JobCgroup | None,
    tree: TreeSampler | None,
    notes: list[str],
    no_cgroup_reason: str,
) -> RunResult:
    """The RunResult of a job that ended: its figures from the cgroups (or the sampled
    tree), ``notes`` added to what the supervision saw."""
    # bwrap reports a job killed by signal N as exit status 128 + N.
    exit_code, sig = decode_status(seen.returncode)
    if exit_code is not None and 128 < exit_code <= 128 + 64:
        sig, exit_code = exit_code - 128, None
    killed = seen.killed or kill_reason_of_signal(sig)
    notes = list(seen.notes) + notes
    cpu_s, peak = (tree.cpu_s, tree.peak_mb) if tree is not None else (0.0, 0.0)
    if cgroup is not None:
        final = cgroup.final
        cpu_s, peak = final.cpu_s, final.peak_memory_mb
        notes += cgroup.notes
        if killed is None and final.oom_kills:
            killed = KillReason.MEMORY
        elif killed is None and final.fork_failures and exit_code != 0:
            killed = KillReason.PROCESSES
    else:
        notes.append(f"bwrap sandbox: {NO_CGROUP_NOTE} ({no_cgroup_reason})")
        notes.append("CPU time and peak memory are sampled from /proc: lower bounds")
    return seen.result(
        exit_code=exit_code,
        signal=sig,
        killed=killed,
        cpu_s=cpu_s,
        peak_memory_mb=peak,
        notes=notes,
    )
