"""Where a workspace may be, and who owns what is in it.

A lab's :class:`Confinement` names what no job may reach (the lab, its key folder): a
workspace never holds them and never lies inside them, except in the lab's own ``workspaces``
folder (:func:`check_placement`). Everything in a workspace belongs to the sandbox user for
good: host code that writes there hands what it wrote over (:func:`hand_over`), never the
other way round, so no step can leave a tree half-lent.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rsilab.errors import UserError
from rsilab.sandbox._identity import SandboxUser
from rsilab.sandbox._trees import visit
from rsilab.sandbox.base import RunSpec, SandboxError


class WorkspaceRefused(UserError):
    """A folder cannot be a workspace (it holds the lab, or lies in its private parts)."""


@dataclass(frozen=True)
class Confinement:
    """What one lab asks of its sandbox.

    Attributes:
        user: who jobs run as when rsilab is root (see :mod:`._identity`).
        private: folders no job may reach: never a workspace, never inside or holding one
            (the lab, the ledger key folder).
        workspaces: the lab's own folder of workspaces (inside ``private``, allowed below).
        state: where workspace images and their records live (inside the lab).
        workspace_mb: the size of a workspace's filesystem, unless a caller asks for more.
    """

    user: SandboxUser
    private: tuple[Path, ...] = ()
    workspaces: Path | None = None
    state: Path | None = None
    workspace_mb: int = 1024


def check_placement(folder: Path, confinement: Confinement) -> None:
    """Refuse a workspace that holds a private folder, or lies inside one outside the lab's
    ``workspaces`` folder.

    Raises:
        WorkspaceRefused: saying which private folder, and what to do.
    """
    folder = folder.resolve()
    allowed = confinement.workspaces.resolve() if confinement.workspaces else None
    for private in (p.resolve() for p in confinement.private):
        if private.is_relative_to(folder):
            raise WorkspaceRefused(
                f"workspace {folder} holds {private}, which jobs must never reach (a job there "
                "could read and change it)",
                "use a folder that does not contain the lab or its key folder (without "
                "--workspace, rsilab uses one inside LAB/workspaces)",
            )
        inside_allowed = (
            allowed is not None and folder.is_relative_to(allowed) and folder != allowed
        )
        if folder.is_relative_to(private) and not inside_allowed:
            raise WorkspaceRefused(
                f"workspace {folder} lies inside {private}, which jobs must never reach",
                "use a folder outside the lab, or one under LAB/workspaces/",
            )


def hand_over(workspace: Path, *paths: Path) -> None:
    """Give ``paths`` (and everything under them; default: the whole workspace) to the owner
    of ``workspace``, as host code must after writing there; links are never followed.

    A no-op unless this process is root and the workspace belongs to someone else.
    """
    info = workspace.lstat()
    if os.geteuid() != 0 or info.st_uid == 0:
        return
    owner = (info.st_uid, info.st_gid)
    for top in paths or (workspace,):
        with contextlib.suppress(FileNotFoundError):
            found = top.lstat()
            if (found.st_uid, found.st_gid) != owner:
                os.chown(top, *owner, follow_symlinks=False)
        for dir_fd, name, entry in _below(top):
            if (entry.st_uid, entry.st_gid) != owner:
                with contextlib.suppress(FileNotFoundError):
                    os.chown(name, *owner, dir_fd=dir_fd, follow_symlinks=False)


def strip_setid(top: Path) -> None:
    """Clear set-user-id and set-group-id bits a job left (its filesystem was ``nosuid``;
    the plain folder is not). Only regular files and folders carry them that matter; a FIFO
    or socket is never opened, a link never followed."""
    setid = stat.S_ISUID | stat.S_ISGID
    info = top.lstat()
    if stat.S_ISDIR(info.st_mode) and info.st_mode & setid:
        os.chmod(top, stat.S_IMODE(info.st_mode) & ~setid)
    for dir_fd, name, entry in _below(top):
        if entry.st_mode & setid and (stat.S_ISREG(entry.st_mode) or stat.S_ISDIR(entry.st_mode)):
            # by descriptor: fchmodat cannot refuse links, and O_NOFOLLOW|O_NONBLOCK opens
            # only what was a file or folder a moment ago, never blocking
            with contextlib.suppress(FileNotFoundError):
                fd = os.open(name, _NOFOLLOW, dir_fd=dir_fd)
                try:
                    mode = os.fstat(fd).st_mode
                    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
                        os.fchmod(fd, stat.S_IMODE(mode) & ~setid)
                finally:
                    os.close(fd)


_NOFOLLOW = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _below(top: Path) -> Iterator[tuple[int, str, os.stat_result]]:
    """Every entry under ``top`` when it is a real folder (:func:`._trees.visit`: any depth,
    iterative, no link followed), else nothing."""
    try:
        is_dir = stat.S_ISDIR(top.lstat().st_mode)
    except FileNotFoundError:
        return
    if is_dir:
        yield from visit(top)


def on_own_filesystem(workspace: Path) -> bool:
    """Whether ``workspace`` lies on a loop-mounted filesystem (its size is a kernel limit)."""
    try:
        return os.major(os.stat(workspace).st_dev) == 7  # loop devices' major number
    except OSError:
        return False


def owned_by(workspace: Path, uid: int) -> bool:
    """Whether the workspace folder itself belongs to ``uid`` (not followed if a link)."""
    info = workspace.lstat()
    return info.st_uid == uid and stat.S_ISDIR(info.st_mode)


def check_job(spec: RunSpec, workspace: Path, confinement: Confinement, uid: int | None) -> None:
    """Refuse a job whose workspace or mounts would reach a private folder, or (``uid``
    given: jobs run as that uid) that would write a folder not that uid's workspace.

    Raises:
        SandboxError: what is wrong, and what to do, in one line.
    """
    try:
        check_placement(workspace, confinement)
        for mount in spec.mounts:
            check_placement(Path(mount.source), confinement)
    except WorkspaceRefused as exc:
        raise SandboxError(f"{exc.message}; {exc.hint}") from exc
    writable = [] if spec.read_only_workspace else [workspace]
    writable += [Path(m.source).resolve() for m in spec.mounts if m.writable]
    for folder in writable:
        if uid is not None and not owned_by(folder, uid):
            raise SandboxError(
                f"{folder} is not a workspace of this sandbox (not owned by its uid {uid}): "
                "jobs could not write there; make it with Sandbox.workspace() or "
                "Sandbox.scratch()"
            )
