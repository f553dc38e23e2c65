"""File access inside a workspace that never follows a symbolic link.

Tool arguments reach these helpers already resolved and checked (see
:func:`~rsilab.expos.guards.resolve_workspace_path`), so a path holds no symlink at the time of
the check. Each is then opened again one component at a time from the workspace root with
``O_NOFOLLOW``, so a symlink planted after the check (a sandboxed job racing the tool) is
refused with a :class:`~rsilab.expos.guards.GuardRefusal`, never followed out of the
workspace. POSIX only (``dir_fd`` support), like the sandboxes.

What these helpers create belongs to the workspace root's owner: when rsilab is root and the
workspace belongs to the sandbox user, new files and folders are given to that user before
they appear, so a job or an agent in the sandbox can change them in place.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from rsilab.errors import ToolError
from rsilab.expos.guards import GuardRefusal
from rsilab.records import FlagStage

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO must not block
_TEMP = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@contextlib.contextmanager
def os_errors(shown: str, field: str) -> Iterator[None]:
    """Turn an OSError about ``shown`` (a workspace path) into a ToolError on ``field``."""
    try:
        yield
    except OSError as exc:
        raise _tool_error(exc, shown, field) from exc


def _tool_error(exc: OSError, shown: str, field: str) -> ToolError:
    if isinstance(exc, FileNotFoundError):
        return ToolError("not_found", f"{shown!r} does not exist in the workspace", field=field)
    if isinstance(exc, NotADirectoryError):
        return ToolError(
            "invalid_arguments", f"a part of {shown!r} is a file, not a folder", field=field
        )
    if isinstance(exc, IsADirectoryError):
        return ToolError(
            "invalid_arguments",
            f"{shown!r} is a folder",
            field=field,
            expected="a file; list_files lists a folder",
        )
    if exc.errno == errno.ENAMETOOLONG:
        return ToolError("invalid_arguments", "a name in the path is too long", field=field)
    reason = exc.strerror or type(exc).__name__
    return ToolError("tool_failed", f"could not access {shown!r}: {reason}", field=field)


def _refuse_link(rule: str, shown: str, field: str) -> GuardRefusal:
    return GuardRefusal(
        rule=rule,
        stage=FlagStage.ACCESS,
        message=f"{shown!r} is or passes through a symbolic link; refused (links are never "
        "followed when reading or writing workspace files)",
        field=field,
    )


def _open_at(dir_fd: int, name: str, flags: int, rule: str, shown: str, field: str) -> int:
    try:
        return os.open(name, flags | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError:
        with contextlib.suppress(OSError):
            if stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
                raise _refuse_link(rule, shown, field) from None
        raise


def open_dir(root: Path, parts: Sequence[str], *, create: bool, rule: str, field: str) -> int:
    """A descriptor of the folder ``root/parts``, opened without following any link.

    ``create`` makes missing folders on the way. The caller closes the descriptor. Raises
    GuardRefusal ``rule`` for a link on the way, OSError otherwise.
    """
    shown = str(PurePosixPath(*parts))
    fd = os.open(root, _DIR)  # the workspace root itself is trusted
    try:
        owner = _owner(fd)
        for part in parts:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=fd)
                    if owner is not None:
                        os.chown(part, *owner, dir_fd=fd, follow_symlinks=False)
            child = _open_at(fd, part, _DIR, rule, shown, field)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _owner(root_fd: int) -> tuple[int, int] | None:
    """Who what this process makes in the workspace must belong to: the workspace root's
    owner (the sandbox user) when this process is root and that owner is not; else None."""
    if os.geteuid() != 0:
        return None
    info = os.fstat(root_fd)
    return None if info.st_uid == 0 else (info.st_uid, info.st_gid)


def open_file(root: Path, rel: PurePosixPath, *, rule: str, field: str) -> int:
    """A read-only descriptor of the regular file ``root/rel``, no link followed.

    Raises GuardRefusal ``rule`` for a link, ToolError for a folder or a special file.
    """
    parent = open_dir(root, rel.parts[:-1], create=False, rule=rule, field=field)
    try:
        fd = _open_at(parent, rel.name, _FILE, rule, str(rel), field)
    finally:
        os.close(parent)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a folder")
        raise ToolError("invalid_arguments", f"{str(rel)!r} is not a regular file", field=field)
    return fd


def lstat(root: Path, rel: PurePosixPath, *, rule: str, field: str) -> os.stat_result | None:
    """``rel``'s own status (a link is not followed), or None when it or a folder is missing."""
    try:
        parent = open_dir(root, rel.parts[:-1], create=False, rule=rule, field=field)
    except FileNotFoundError:
        return None
    try:
        return os.stat(rel.name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return None
    finally:
        os.close(parent)


@dataclass(frozen=True)
class Change:
    """One file to replace (``data``) or delete (``data`` None), relative to the root."""

    rel: PurePosixPath
    data: bytes | None
    mode: int | None = None
    """Permission bits to give the new file (those of the file it replaces)."""


def commit(
    root: Path, changes: Sequence[Change], *, create_dirs: bool, rule: str, field: str
) -> None:
    """Make every change: write all temporary files first, then rename and delete.

    Each file is replaced atomically (a temporary file in the same folder, then a rename), so
    a reader sees the old or the new content, never a mix. If any temporary file cannot be
    written, no change is made. A rename itself failing midway (the disk removed) may leave
    the changes before it made.
    """
    staged: list[tuple[int, str, str | None]] = []  # folder fd, name, temp name
    done = 0
    root_fd = os.open(root, _DIR)
    try:
        owner = _owner(root_fd)
    finally:
        os.close(root_fd)
    try:
        for change in changes:
            folder = open_dir(
                root, change.rel.parts[:-1], create=create_dirs, rule=rule, field=field
            )
            staged.append((folder, change.rel.name, None))
            if change.data is not None:
                written = _write_temp(folder, change.data, change.mode, owner)
                staged[-1] = (folder, change.rel.name, written)
        for folder, name, temp in staged:
            if temp is None:
                os.unlink(name, dir_fd=folder)
            else:
                os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
            done += 1
    finally:
        for k, (fd, _, left) in enumerate(staged):
            if left is not None and k >= done:
                with contextlib.suppress(OSError):
                    os.unlink(left, dir_fd=fd)
            os.close(fd)


def _write_temp(folder: int, data: bytes, mode: int | None, owner: tuple[int, int] | None) -> str:
    name = f".rsilab-write-{secrets.token_hex(8)}.tmp"
    fd = os.open(name, _TEMP, 0o666, dir_fd=folder)
    try:
        if owner is not None:  # the sandbox user edits it in place, as if it had written it
            os.fchown(fd, *owner)
        if mode is not None:
            os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=folder)
        raise
    os.close(fd)
    return name
