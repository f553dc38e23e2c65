"""Per-job cgroups (v1): memory, pids, cpuacct and freezer groups that hold a whole job tree.

Each job gets one group per controller, created under the cgroup this process already sits in
for that controller (never at the hierarchy root, which a container may not own), and removed
after the job. Killing freezes the group first, so no process can fork while the rest are
being killed, then sends SIGKILL to every member and thaws it.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from rsilab.faults import fault_point

CONTROLLERS = ("memory", "pids", "cpuacct", "freezer")
_PREFIX = "rsilab-job-"
_counter = itertools.count(1)


def _mountpoints() -> dict[str, tuple[Path, str]]:
    """controller -> (mount point, root of the hierarchy shown there) for cgroup v1 mounts."""
    found: dict[str, tuple[Path, str]] = {}
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        before, _, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if len(fields) < 5 or len(tail) < 3 or tail[0] != "cgroup":
            continue
        for option in tail[2].split(","):
            if option in CONTROLLERS:
                found.setdefault(option, (Path(fields[4]), fields[3]))
    return found


def _own_groups() -> dict[str, str]:
    """controller -> this process's cgroup path in that hierarchy, from /proc/self/cgroup."""
    groups: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            parts = line.split(":", 2)
            if len(parts) == 3:
                for controller in parts[1].split(","):
                    groups[controller] = parts[2]
    return groups


@dataclass(frozen=True)
class CgroupSupport:
    """Where job groups go (one parent folder per controller), or why they cannot be made."""

    parents: dict[str, Path]
    reason: str = ""

    @property
    def available(self) -> bool:
        return not self.reason


def probe() -> CgroupSupport:
    """Find a writable parent for every controller, by creating and removing a test group."""
    if os.geteuid() != 0:
        return CgroupSupport({}, "not running as root, so job cgroups cannot be created")
    mounts, own = _mountpoints(), _own_groups()
    parents: dict[str, Path] = {}
    for controller in CONTROLLERS:
        if controller not in mounts or controller not in own:
            return CgroupSupport({}, f"the cgroup v1 '{controller}' controller is not mounted")
        mountpoint, root = mounts[controller]
        relative = os.path.relpath(own[controller], root)
        if relative.startswith(".."):
            return CgroupSupport({}, f"this process's '{controller}' cgroup is not visible")
        parent = mountpoint if relative == "." else mountpoint / relative
        test = parent / f"{_PREFIX}probe-{os.getpid()}-{secrets.token_hex(3)}"
        try:
            test.mkdir()
            test.rmdir()
        except OSError as exc:
            return CgroupSupport({}, f"cannot create a cgroup under {parent}: {exc.strerror}")
        parents[controller] = parent
    _remove_stale(parents)
    return CgroupSupport(parents)


def _remove_stale(parents: dict[str, Path], settle_s: float = 2.0) -> None:
    """Remove the job groups of rsilab processes that died before cleaning up.

    Such a process may have died between freezing a job's tree and thawing it (in
    :meth:`JobCgroup.kill_all`): the members then sit frozen with a SIGKILL pending, for good.
    So every member of a dead owner's group is killed and its freezer thawed first (they die
    as they thaw); then each group is removed once empty (up to ``settle_s`` in all).
    """
    stale = [
        group
        for parent in parents.values()
        for group in parent.glob(f"{_PREFIX}*")
        if _owner_is_dead(group)
    ]
    for group in stale:
        for pid in _members(group):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        state = group / "freezer.state"
        if state.exists():
            with contextlib.suppress(OSError):
                state.write_text("THAWED")
    deadline = time.monotonic() + settle_s
    for group in stale:
        while _members(group) and time.monotonic() < deadline:
            time.sleep(0.01)
        with contextlib.suppress(OSError):
            group.rmdir()


def _owner_is_dead(group: Path) -> bool:
    owner = group.name.removeprefix(_PREFIX).split("-", 1)[0]
    return owner.isdigit() and not Path(f"/proc/{owner}").exists()


def _members(group: Path) -> list[int]:
    try:
        return [int(p) for p in (group / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _read_int(path: Path, default: int = 0) -> int:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return default


def _read_keyed(path: Path, key: str) -> int:
    """The value of ``key`` in a ``key value`` per line file (memory.oom_control, pids.events)."""
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key and value.strip().isdigit():
                return int(value)
    return 0


@dataclass(frozen=True)
class Final:
    """A job's figures, read once its tree is gone and before its groups are removed."""

    cpu_s: float = 0.0
    peak_memory_mb: float = 0.0
    oom_kills: int = 0
    fork_failures: int = 0


class JobCgroup:
    """The groups of one job; create with :meth:`create`, always end with :meth:`remove`."""

    def __init__(self, support: CgroupSupport) -> None:
        name = f"{_PREFIX}{os.getpid()}-{next(_counter)}-{secrets.token_hex(3)}"
        self.dirs = {c: p / name for c, p in support.parents.items()}
        self.notes: list[str] = []
        self.final = Final()

    def create(self, memory_mb: int, processes: int) -> None:
        """Make the groups and set their limits; OSError if the host refuses."""
        for folder in self.dirs.values():
            folder.mkdir()
        memory = self.dirs["memory"]
        limit = str(memory_mb * 1024 * 1024)
        (memory / "memory.limit_in_bytes").write_text(limit)
        memsw = memory / "memory.memsw.limit_in_bytes"
        if memsw.exists():
            try:  # also cap swap, so memory cannot spill out of the limit
                memsw.write_text(limit)
            except OSError:
                self.notes.append("swap is not accounted by this kernel; memory limit is RAM only")
        (self.dirs["pids"] / "pids.max").write_text(str(processes))

    def procs_files(self) -> list[Path]:
        """The ``cgroup.procs`` files a process writes its pid to, to join every group."""
        return [folder / "cgroup.procs" for folder in self.dirs.values()]

    def add(self, pid: int) -> None:
        for procs in self.procs_files():
            procs.write_text(str(pid))

    def cpu_s(self) -> float:
        return _read_int(self.dirs["cpuacct"] / "cpuacct.usage") / 1e9

    def peak_memory_mb(self) -> float:
        """Peak usage charged to the job (resident pages plus page cache it brought in)."""
        return _read_int(self.dirs["memory"] / "memory.max_usage_in_bytes") / (1024 * 1024)

    def oom_kills(self) -> int:
        """Processes the kernel killed for the memory limit (falls back to failed charges)."""
        control = self.dirs["memory"] / "memory.oom_control"
        kills = _read_keyed(control, "oom_kill")
        return kills or _read_keyed(control, "under_oom")

    def fork_failures(self) -> int:
        """Forks refused by pids.max."""
        return _read_keyed(self.dirs["pids"] / "pids.events", "max")

    def pids(self) -> list[int]:
        try:
            text = (self.dirs["freezer"] / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(p) for p in text.split()]

    def kill_all(self) -> None:
        """Freeze the tree, SIGKILL every member, thaw; members die as they thaw."""
        state = self.dirs["freezer"] / "freezer.state"
        with contextlib.suppress(OSError):
            state.write_text("FROZEN")
            deadline = time.monotonic() + 1.0
            while state.read_text().strip() != "FROZEN" and time.monotonic() < deadline:
                time.sleep(0.005)  # freezing is asynchronous; it normally settles in microseconds
        members = self.pids()
        if members:
            fault_point("job_frozen")
        for pid in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            state.write_text("THAWED")

    def remove(self, timeout_s: float = 5.0) -> None:
        """Kill what is left, keep the final figures in :attr:`final`, remove every group.

        A group still busy after the timeout is left behind (a note says so); a later rsilab
        process removes it once empty.
        """
        deadline = time.monotonic() + timeout_s
        while self.pids() and time.monotonic() < deadline:
            self.kill_all()
            time.sleep(0.005)  # killed members leave the group as they are reaped
        self.final = Final(
            self.cpu_s(), self.peak_memory_mb(), self.oom_kills(), self.fork_failures()
        )
        for folder in self.dirs.values():
            while True:
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                        self.notes.append(f"could not remove cgroup {folder}: {exc.strerror}")
                        break
                    self.kill_all()
                    time.sleep(0.01)  # members are still exiting; retry until the deadline
