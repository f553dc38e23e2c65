"""Reading trees a job may have written: bounded in depth, iterative, no link followed, no
special file opened.

A job controls its workspace: it can nest folders thousands deep and leave FIFOs, sockets
and links anywhere. Python 3.11's :func:`os.walk`, :func:`os.fwalk`, :func:`shutil.copytree`
and :meth:`pathlib.Path.rglob` recurse once per level (a deep tree raised
:class:`RecursionError` in the host), and opening a FIFO blocks until a writer comes (a tool
call that never returns). :func:`walk` holds one descriptor per level, at most
:data:`MAX_TREE_DEPTH` + 1, and refuses a deeper tree with :class:`TreeRefused`, a
:class:`~rsilab.errors.UserError` that names the path and the limit (a tool answers it as a
clear error). :func:`open_regular` opens a regular file only, never blocking on anything else.
Deleting a tree of any depth is :func:`rsilab.sandbox.remove_tree`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from rsilab.errors import UserError

MAX_TREE_DEPTH = 64
"""The most names a path in a walked tree may have (a file 64 folders deep is refused, one
63 deep is not): far beyond any real project, small enough that a walk holds few descriptors
and an error message stays short."""

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO must not block
_SHOWN = 160


class TreeRefused(UserError):
    """A tree is deeper than :data:`MAX_TREE_DEPTH`, or holds an entry that cannot be read as
    what it claims (a FIFO, socket or device where a file is needed); the message names the
    path."""


def shown(rel: PurePosixPath | str) -> str:
    """A path for a message, cut short when a deep tree would make it long."""
    text = str(rel)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def too_deep(where: PurePosixPath | str, limit: int = MAX_TREE_DEPTH) -> TreeRefused:
    """The refusal of a tree with ``where`` (a path below its root) deeper than ``limit``."""
    return TreeRefused(
        f"{shown(where)!r} lies more than {limit} levels deep; rsilab reads trees at most "
        f"{limit} levels deep",
        "remove or flatten the deep folders (a job can), then try again",
    )


def special(where: PurePosixPath | str, info: os.stat_result) -> TreeRefused:
    """The refusal of an entry that is not a regular file, folder or link."""
    return TreeRefused(
        f"{shown(where)!r} is {kind(info.st_mode)}: rsilab reads only regular files, "
        "folders and links there, and never opens anything else",
        "remove it (a job can), then try again",
    )


def kind(mode: int) -> str:
    """What a file mode is, in words: 'a FIFO', 'a socket', 'a device', ..."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device node"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "a regular file" if stat.S_ISREG(mode) else "a special file"


@dataclass(frozen=True)
class Entry:
    """One entry of a walked tree.

    Attributes:
        rel: its path below the root.
        info: its own status (``lstat``: a link is not followed).
        dir_fd: a descriptor of its folder, valid only until the walk goes on.
        name: its name in that folder.
    """

    rel: PurePosixPath
    info: os.stat_result
    dir_fd: int
    name: str


def walk(
    root: Path,
    *,
    skip: Callable[[PurePosixPath, str], bool] | None = None,
    max_depth: int = MAX_TREE_DEPTH,
    root_fd: int | None = None,
) -> Iterator[Entry]:
    """Every entry under the folder ``root``, pre-order, each folder's names sorted.

    Iterative; links are yielded, never followed; only folders are opened. ``skip(rel,
    name)`` leaves an entry (and all under it) out. An entry that vanishes meanwhile is left
    out. ``root_fd`` (a folder descriptor, not closed here) is walked instead of ``root``,
    which then only names it.

    Raises:
        TreeRefused: an entry has more than ``max_depth`` names, before it is yielded.
        OSError: ``root`` cannot be opened as a folder (a link is not followed).
    """
    top = os.open(root, _DIR) if root_fd is None else os.dup(root_fd)
    stack: list[tuple[int, PurePosixPath, list[str]]] = []
    try:
        stack.append((top, PurePosixPath(), sorted(os.listdir(top), reverse=True)))
        while stack:
            fd, here, todo = stack[-1]
            if not todo:
                os.close(stack.pop()[0])
                continue
            name = todo.pop()
            rel = here / name
            if skip is not None and skip(rel, name):
                continue
            if len(rel.parts) > max_depth:
                raise too_deep(rel, max_depth)
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            yield Entry(rel, info, fd, name)
            if stat.S_ISDIR(info.st_mode):
                try:
                    child = os.open(name, _DIR, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
                        continue  # gone or swapped for a link or file since: nothing below
                    raise
                try:
                    names = sorted(os.listdir(child), reverse=True)
                except OSError:
                    os.close(child)
                    raise
                stack.append((child, rel, names))
    finally:
        for fd, _, _ in stack:
            with contextlib.suppress(OSError):
                os.close(fd)


def open_regular(dir_fd: int | None, name: str | Path, shown_as: PurePosixPath | str) -> int:
    """A read-only descriptor of the regular file ``name`` (relative to ``dir_fd``, or a
    path), the caller closes it. Opened without following a link and without blocking, then
    checked: anything but a regular file is closed again and refused.

    Raises:
        TreeRefused: ``name`` is a FIFO, socket, device, folder or link.
        OSError: it cannot be opened (missing, no permission).
    """
    try:
        fd = os.open(name, _FILE, dir_fd=dir_fd)
    except OSError as exc:  # a link (ELOOP) or a socket (ENXIO) cannot be opened at all
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            raise exc from None
        if stat.S_ISREG(info.st_mode):
            raise
        raise special(shown_as, info) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise special(shown_as, info)
    os.set_blocking(fd, True)  # a regular file never blocks; plain reads from here on
    return fd
