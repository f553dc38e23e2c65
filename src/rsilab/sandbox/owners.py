"""Which process owns a thing, and whether it is dead; temporary folders named by their owner.

A process killed with SIGKILL runs no cleanup, so what it made for itself (a controller's
throwaway harness copy, a sandbox's support files) stays in the temporary folder. To tell such
leftovers from a live process's folders, rsilab names them by their owner:
``rsilab-<kind>-<pid>@<boot>-<random>`` (:func:`owned_prefix`), where ``boot`` is the first 8
hex digits of the kernel's boot id. :func:`sweep_dead_tmpdirs` removes exactly the folders of
that form whose owner is certainly dead; everything else (folders of live processes, of
processes whose death cannot be proved, of other users, and names of any other form) stays.

The liveness rule, :func:`is_dead`: an owner of another boot is dead (its process cannot have
survived a reboot); one of this boot is dead when no process has its pid, or only a zombie
does. A pid reused by an unrelated process makes a dead owner look alive, so its folder is
kept: a leftover, never a live process's folder removed. Pids of other pid namespaces sharing
the temporary folder are not told apart; rsilab does not run that way.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rsilab.sandbox import _trees

_NAME = re.compile(r"^rsilab-(?P<kind>[a-z][a-z0-9-]*?)-(?P<pid>\d+)@(?P<boot>[0-9a-f]{8}|x{8})-")
_UNKNOWN_BOOT = "x" * 8


@dataclass(frozen=True)
class Owner:
    """A process of this host: its pid and the boot it ran in ('' when unknown)."""

    pid: int
    boot_id: str


def boot_id() -> str:
    """The kernel's boot id (changes at every boot), or '' where there is none."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def this_process() -> Owner:
    """The owner record of the calling process."""
    return Owner(os.getpid(), boot_id())


def pid_alive(pid: int) -> bool:
    """False only when ``pid`` certainly does not run here (a zombie counts as dead)."""
    if os.name != "posix":
        return True  # os.kill(pid, 0) would terminate the process on Windows
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # EPERM: it exists under another user
    try:  # killed but not yet reaped by its parent: signal 0 still succeeds
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return status.rsplit(")", 1)[-1].split()[:1] != ["Z"]


def is_dead(owner: Owner) -> bool:
    """True only when certain that ``owner`` (a process of this host) no longer runs.

    ``owner.boot_id`` may be a prefix of the boot id (the 8 digits a folder name keeps).
    """
    current, theirs = boot_id().replace("-", ""), owner.boot_id.replace("-", "")
    if current and theirs and not current.startswith(theirs):
        return True
    return not pid_alive(owner.pid)


def owned_prefix(kind: str) -> str:
    """The name prefix of a temporary folder of ``kind`` owned by the calling process; pass
    it as ``prefix`` to :func:`tempfile.mkdtemp` or :class:`tempfile.TemporaryDirectory`."""
    if not re.fullmatch(r"[a-z][a-z0-9-]*", kind):
        raise ValueError(f"folder kind {kind!r}: lower-case letters, digits and '-' only")
    boot = boot_id().replace("-", "")[:8] or _UNKNOWN_BOOT
    return f"rsilab-{kind}-{os.getpid()}@{boot}-"


def owner_of(name: str) -> Owner | None:
    """The owner a folder name made with :func:`owned_prefix` names, or None for any other
    name."""
    found = _NAME.match(name)
    if found is None:
        return None
    boot = found["boot"]
    return Owner(int(found["pid"]), "" if boot == _UNKNOWN_BOOT else boot)


def sweep_dead_tmpdirs(root: Path | None = None) -> list[Path]:
    """Remove the owner-named folders in ``root`` (default: the system's temporary folder)
    whose owner is dead (:func:`is_dead`); the folders removed.

    Only real folders (not links) owned by the calling user are touched, so a name planted
    by someone else never makes this remove anything of theirs or anything it points to. A
    dead process's scratch workspace with its own filesystem mounted inside is unmounted and
    removed first (:func:`rsilab.sandbox._workspaces.remove_stale_scratch`, not listed); a
    folder with a mount left inside is never entered. A folder that cannot be removed
    entirely is left (and not listed); the next sweep tries again.
    """
    from rsilab.sandbox._workspaces import remove_stale_scratch  # it builds on this module

    with contextlib.suppress(OSError):
        remove_stale_scratch()
    folder = Path(root) if root is not None else Path(tempfile.gettempdir())
    removed = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    for name in names:
        owner = owner_of(name)
        if owner is None or not is_dead(owner):
            continue
        path = folder / name
        try:
            info = path.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            continue
        if not _holds_mount(path, info.st_dev) and remove_tree(path):
            removed.append(path)
    return removed


def remove_tree(path: Path) -> bool:
    """Remove the folder ``path`` and everything in it, at any depth, making the folders
    inside it writable where a job left them read-only (links are never followed; see
    :func:`._trees.remove_tree`); True when it is gone."""
    with contextlib.suppress(OSError):
        _trees.remove_tree(path)
    return not os.path.lexists(path)


def _holds_mount(folder: Path, device: int) -> bool:
    """Whether a folder under ``folder`` lies on another filesystem than ``device`` (an
    unreadable tree counts as holding one: it is left alone)."""
    try:
        return any(
            stat.S_ISDIR(info.st_mode) and info.st_dev != device
            for _, _, info in _trees.visit(folder)
        )
    except OSError:
        return True
