"""What every sandbox shares: spec checks, the job's environment, disk use, exit decoding."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import stat
import time
from pathlib import Path

from rsilab.sandbox.base import KillReason, Limits, RunSpec

THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "TORCH_NUM_THREADS",
)
"""Set to ``spec.threads``; harnesses call ``torch.set_num_threads(int(TORCH_NUM_THREADS))``."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SYSTEM_DIRS = ("/", "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/boot", "/dev")


def validate(spec: RunSpec) -> Path:
    """Check ``spec``; returns the workspace resolved.

    Raises:
        ValueError: argv empty or not text, workspace missing or a system folder, a bad
            environment name, threads or a limit not positive.
    """
    if not spec.argv or not all(isinstance(a, str) and "\0" not in a for a in spec.argv):
        raise ValueError("argv must be a non-empty sequence of strings without NUL bytes")
    workspace = Path(spec.workspace).resolve()
    if not workspace.is_dir():
        raise ValueError(f"workspace {spec.workspace} is not a folder")
    if str(workspace) in _SYSTEM_DIRS or workspace == Path.home().resolve():
        raise ValueError(f"workspace {workspace} is a system or home folder; use a job folder")
    for name, value in spec.env.items():
        if not _ENV_NAME.match(name) or "\0" in value:
            raise ValueError(f"environment variable {name!r} has a bad name or value")
    if spec.threads < 1:
        raise ValueError("threads must be at least 1")
    limits = spec.limits
    numbers = (limits.cpu_s, limits.memory_mb, limits.processes, limits.wall_s)
    if min(*numbers, limits.output_bytes, limits.disk_mb, limits.file_mb) <= 0:
        raise ValueError(f"every limit must be positive: {limits}")
    for mount in spec.mounts:
        if not Path(mount.target).is_absolute():
            raise ValueError(f"mount target {mount.target} must be an absolute path")
        if not Path(mount.source).exists():
            raise ValueError(f"mount source {mount.source} does not exist")
    return workspace


def job_env(spec: RunSpec, *, path: str, home: str) -> dict[str, str]:
    """The whole environment of a job: basics, thread variables, then ``spec.env`` on top."""
    env = {"PATH": path, "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8"}
    env.update({name: str(spec.threads) for name in THREAD_VARIABLES})
    env.update(spec.env)
    return env


def disk_usage(root: Path) -> int:
    """Bytes a tree takes, never following links; every entry costs at least one block."""
    total = 0
    stack = [root]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += max(info.st_size, info.st_blocks * 512, 4096)
                    if stat.S_ISDIR(info.st_mode):
                        stack.append(Path(entry.path))
        except OSError:
            continue  # vanished or unreadable while the job runs: counted next time
    return total


class DiskWatch:
    """Polls a workspace's size, less often when scanning it is slow (a big tree)."""

    def __init__(self, root: Path, limits: Limits) -> None:
        self.root = root
        self.limit = limits.disk_mb * 1024 * 1024
        self.interval = 0.1
        self.next_at = 0.0

    def over(self) -> bool:
        now = time.monotonic()
        if now < self.next_at:
            return False
        used = disk_usage(self.root)
        took = time.monotonic() - now
        self.next_at = time.monotonic() + max(self.interval, 20 * took)
        return used > self.limit


def peak_rss_mb(pid: int) -> float:
    """The high-water resident size of one live process (VmHWM), 0.0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def decode_status(returncode: int) -> tuple[int | None, int | None]:
    """(exit code, signal) from a Popen-style return code (negative: killed by a signal)."""
    if returncode < 0:
        return None, -returncode
    return returncode, None


def kill_reason_of_signal(sig: int | None) -> KillReason | None:
    """Limits the kernel enforces by signal: CPU rlimit (SIGXCPU) and file size (SIGXFSZ)."""
    if sig == signal.SIGXCPU:
        return KillReason.CPU_TIME
    if sig == signal.SIGXFSZ:
        return KillReason.DISK
    return None


def rlimit_args(limits: Limits, *, per_process: bool, nproc: int | None) -> list[str]:
    """``prlimit`` options: always core, file size and open files; CPU, data and process count
    only where no cgroup holds the whole tree (``per_process``)."""
    file_bytes = limits.file_mb * 1024 * 1024
    args = ["--core=0", f"--fsize={file_bytes}", "--nofile=4096"]
    if per_process:
        cpu = max(1, int(limits.cpu_s + 0.999))
        data = limits.memory_mb * 1024 * 1024
        args += [f"--cpu={cpu}:{cpu + 1}", f"--data={data}"]
    if nproc is not None:
        args.append(f"--nproc={nproc}")
    return args


def processes_of(uid: int) -> int:
    """How many processes ``uid`` runs now (RLIMIT_NPROC counts them all, not one tree)."""
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += 1
            except OSError:
                continue
    return count


class FdArgs:
    """bwrap's options and seccomp filter in two anonymous in-memory files, passed to it as
    ``--args FD`` and ``--seccomp FD``, so they never appear in a command line (a job reads
    bwrap's, its pid 1, at ``/proc/1/cmdline``). bwrap reads and closes both before the job
    starts; this process's copies close when the block ends."""

    def __init__(self, args: list[str], seccomp: bytes) -> None:
        if any("\0" in a for a in args):
            raise ValueError("a bwrap argument holds a NUL byte")
        self.args = _memfd("rsilab-bwrap-args", b"".join(a.encode() + b"\0" for a in args))
        self.seccomp = _memfd("rsilab-seccomp", seccomp)

    @property
    def pass_fds(self) -> tuple[int, int]:
        return (self.args, self.seccomp)

    def __enter__(self) -> FdArgs:
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in self.pass_fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd
