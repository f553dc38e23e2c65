"""Walking and deleting trees a job wrote, at any depth, without recursion or following links.

A job controls its workspace: it can nest folders thousands deep (``os.makedirs('x');
os.chdir('x')`` in a loop) and leave FIFOs, sockets and links anywhere. Python 3.11's
:func:`shutil.rmtree`, :func:`os.walk`, :func:`os.fwalk` and :meth:`pathlib.Path.rglob` recurse
once per level, so such a tree raised :class:`RecursionError` in host code that had to clear it,
and one actor's workspace took the whole lab down. Everything here is iterative and holds one
folder descriptor at a time, so depth costs memory for names only; deletion has no depth limit
(a faulty workspace must always be clearable). Only folders are ever opened (``O_NOFOLLOW``,
``O_DIRECTORY``); every other entry is handled by name relative to its folder's descriptor
(unlink, ``fchownat``), so a FIFO is never opened and a link never followed.

Climbing back up reopens ``..`` of the current folder and checks it is the folder that was
come down from (device and inode): a folder moved away meanwhile stops the walk with an
:class:`OSError` instead of letting it wander out of the tree.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass
class _Level:
    """One folder on the way down: its identity and the names still to visit in it."""

    ident: tuple[int, int]
    name: str  # its name in the folder above ("" for the top)
    todo: list[str] = field(default_factory=list)


def _ident(info: os.stat_result) -> tuple[int, int]:
    return info.st_dev, info.st_ino


def _names(fd: int) -> list[str]:
    """The entries of the folder ``fd``, in reverse sorted order (popped from the end)."""
    return sorted(os.listdir(fd), reverse=True)


def _up(fd: int, expected: tuple[int, int]) -> int:
    """A new descriptor of the folder above ``fd``, which must be ``expected``."""
    parent = os.open("..", _DIR, dir_fd=fd)
    if _ident(os.fstat(parent)) != expected:
        os.close(parent)
        raise OSError(errno.ESTALE, "a folder was moved while its tree was walked")
    return parent


def _writable(fd: int, name: str, info: os.stat_result) -> None:
    """Give the owner full rights on a folder lacking them (a job's read-only folder), so it
    can be listed and emptied; only folders about to be deleted get this."""
    if info.st_mode & stat.S_IRWXU != stat.S_IRWXU:
        with contextlib.suppress(OSError):
            os.chmod(name, stat.S_IMODE(info.st_mode) | stat.S_IRWXU, dir_fd=fd)


def visit(top: Path) -> Iterator[tuple[int, str, os.stat_result]]:
    """Every entry under the folder ``top`` (not ``top`` itself), pre-order: ``(dir_fd, name,
    lstat)``, where ``dir_fd`` is the entry's folder, valid only until the next step.

    Any depth; links are reported, never followed; nothing but folders is opened. An entry
    that vanishes meanwhile is left out. A caller acting on an entry uses ``dir_fd`` and
    ``name`` with ``follow_symlinks=False``.

    Raises:
        OSError: ``top`` is not a folder (a link is not followed), or a folder was moved
            while the walk was in it.
    """
    fd = os.open(top, _DIR)
    levels = [_Level(_ident(os.fstat(fd)), "", _names(fd))]
    try:
        while levels:
            level = levels[-1]
            if not level.todo:
                levels.pop()
                if levels:
                    parent = _up(fd, levels[-1].ident)
                    os.close(fd)
                    fd = parent
                continue
            name = level.todo.pop()
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            yield fd, name, info
            if not stat.S_ISDIR(info.st_mode):
                continue
            try:
                child = os.open(name, _DIR, dir_fd=fd)
            except OSError:
                continue  # gone, replaced by a link, or unreadable: nothing of it to visit
            try:
                names = _names(child)
            except OSError:
                os.close(child)
                continue
            os.close(fd)
            fd = child
            levels.append(_Level(_ident(os.fstat(fd)), name, names))
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)


def remove_tree(path: Path, *, keep_top: bool = False) -> None:
    """Delete ``path`` and everything under it (with ``keep_top``: only what is in it).

    Any depth, no recursion; a link is removed, never followed; a FIFO, socket or device is
    unlinked, never opened; folders a job made read-only are made writable first. ``path``
    missing is not an error. ``keep_top`` on something not a folder raises NotADirectoryError.

    Raises:
        OSError: an entry could not be removed (a mount point, no permission), or a folder
            was moved while it was being emptied.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        if keep_top:
            raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(path))
        os.unlink(path)
        return
    with contextlib.suppress(OSError):
        if info.st_mode & stat.S_IRWXU != stat.S_IRWXU:
            os.chmod(path, stat.S_IMODE(info.st_mode) | stat.S_IRWXU)
    fd = os.open(path, _DIR)
    levels = [_Level(_ident(os.fstat(fd)), "")]
    try:
        while True:
            child = _empty_or_descend(fd)
            if child is not None:
                fd, name = child
                levels.append(_Level(_ident(os.fstat(fd)), name))
                continue
            done = levels.pop()
            if not levels:
                break
            parent = _up(fd, levels[-1].ident)
            os.close(fd)
            fd = parent
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(done.name, dir_fd=fd)
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    if not keep_top:
        os.rmdir(path)


def _empty_or_descend(fd: int) -> tuple[int, str] | None:
    """Unlink everything but folders in ``fd``; on the first folder met, return a descriptor
    of it (``fd`` closed) and its name, or None once ``fd`` holds nothing more."""
    for name in _names(fd):
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(info.st_mode):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=fd)
            continue
        _writable(fd, name, info)
        try:
            child = os.open(name, _DIR, dir_fd=fd)
        except FileNotFoundError:
            continue
        os.close(fd)
        return child, name
    return None
