"""Host-side access to what a sandboxed job wrote, never through a symbolic link.

A job owns its workspace while it runs: it may replace any folder in it by a link to a host
path (``runs/<job>`` pointing at a root-only folder), and the host, which reads the job's model
and may write into the workspace afterwards as root, would then read or write that host path.
So the host reaches a job's file one path component at a time from the workspace root with
``O_NOFOLLOW``: a link anywhere on the way, or an end that is not a regular file (a FIFO that
would block the reader, a device), is refused with :class:`UnsafePath`. POSIX only (``dir_fd``),
like the sandboxes.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path, PurePosixPath

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO must not block
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePath(OSError):
    """A path a job wrote passes through a symbolic link, or ends in something other than a
    regular file: the host does not follow it."""


def _parts(rel: str) -> list[str]:
    parts = PurePosixPath(rel).parts
    if not parts or PurePosixPath(rel).is_absolute() or ".." in parts:
        raise UnsafePath(errno.EINVAL, f"{rel!r} is not a path inside the workspace")
    return [p for p in parts if p != "."]


def _open_dirs(root: Path, parts: list[str], rel: str) -> int:
    """An fd of the folder holding ``parts[-1]``, reached without following a link."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            try:
                child = os.open(part, _DIR, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(fd, part):
                    link = f"{rel!r} passes through a link at {part!r}"
                    raise UnsafePath(errno.ELOOP, link) from exc
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def open_written(root: Path, rel: str) -> int:
    """A read-only descriptor of the regular file at ``rel`` under ``root``, reached without
    following any link (the caller closes it).

    Raises:
        FileNotFoundError: nothing is there.
        UnsafePath: a link is on the way or at the end, or the end is not a regular file.
    """
    parts = _parts(rel)
    folder = _open_dirs(root, parts, rel)
    try:
        try:
            fd = os.open(parts[-1], _READ, dir_fd=folder)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafePath(errno.ELOOP, f"{rel!r} is a link") from exc
            raise
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise UnsafePath(errno.EINVAL, f"{rel!r} is not a regular file")
        return fd
    finally:
        os.close(folder)


def write_empty(root: Path, rel: str) -> None:
    """Replace what is at ``rel`` under ``root`` by an empty regular file, without following
    any link on the way (a link at the end is removed, never written through).

    Raises:
        UnsafePath: a link is on the way.
        OSError: the folder is missing or cannot be written.
    """
    parts = _parts(rel)
    folder = _open_dirs(root, parts, rel)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(parts[-1], dir_fd=folder)
        os.close(os.open(parts[-1], _CREATE, 0o644, dir_fd=folder))
    finally:
        os.close(folder)
