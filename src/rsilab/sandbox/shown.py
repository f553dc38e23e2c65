"""Host paths every job sees read-only at their own place (a task's local model).

A sandbox shows such a path to its jobs as it is on the host: :func:`problem` says, before
any job runs, what would make it unusable there - a file or folder the jobs' user cannot
read, or a symbolic link leading out of it (the sandbox shows only the path itself, so such
a link would dangle inside; a Hugging Face cache's snapshot folder is made of them) - and
:func:`tree_digest` names its bytes, so a campaign can record what its jobs read.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

_CHUNK = 1 << 20


@dataclass(frozen=True)
class TreeDigest:
    """The bytes under a path: ``sha256`` over every file's relative path, size and sha256
    (sorted by path), how many files and how many bytes."""

    sha256: str
    files: int
    bytes: int


def _can(mode: os.stat_result, uid: int, gid: int, bits: int) -> bool:
    """Whether ``uid`` (primary group ``gid``, no other groups) has ``bits`` (of r=4, x=1) on
    a file with ``mode``, by its permission bits (root has them all)."""
    if uid == 0:
        return True
    if mode.st_uid == uid:
        shift = 6
    elif mode.st_gid == gid:
        shift = 3
    else:
        shift = 0
    return (mode.st_mode >> shift) & bits == bits


UNREADABLE_HINT = (
    "make it readable by everyone (chmod -R a+rX MODEL, and a+x on the folders above it), "
    "with its files inside it (cp -rL a cache snapshot to a folder of its own)"
)
"""What to do about a model folder :func:`problem` finds fault with."""


def problem(path: Path, uid: int, gid: int) -> str | None:
    """What keeps the user ``uid``/``gid`` (no other groups) from reading all of ``path``
    inside a sandbox that shows ``path`` alone; None when nothing does.

    Checks that ``path`` exists, that each folder above it can be passed through, that every
    folder under it can be listed and passed through and every file read, and that no
    symbolic link under it leads outside it.
    """
    path = Path(path)
    if not path.exists():
        return f"{path} does not exist"
    for above in reversed(path.parents):
        if not _can(above.stat(), uid, gid, 1):
            return f"the folder {above} cannot be passed through by the jobs' user (uid {uid})"
    root = path.resolve()
    found = [path] + (sorted(path.rglob("*")) if path.is_dir() else [])
    for item in found:
        if item.is_symlink():
            target = item.resolve()
            if not target.is_relative_to(root):
                return (
                    f"{item} is a link to {target}, outside {path}: it would lead nowhere "
                    "inside the sandbox"
                )
        mode = item.stat()
        bits = 5 if stat.S_ISDIR(mode.st_mode) else 4
        if not _can(mode, uid, gid, bits):
            return f"{item} cannot be read by the jobs' user (uid {uid})"
    return None


def tree_digest(path: Path) -> TreeDigest:
    """The :class:`TreeDigest` of a file or of every file under a folder (links followed)."""
    path = Path(path)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    whole = hashlib.sha256()
    total = 0
    for file in files:
        one = hashlib.sha256()
        size = 0
        with file.open("rb") as stream:
            while chunk := stream.read(_CHUNK):
                one.update(chunk)
                size += len(chunk)
        name = file.relative_to(path).as_posix() if path.is_dir() else file.name
        whole.update(f"{name}\0{size}\0{one.hexdigest()}\n".encode())
        total += size
    return TreeDigest(whole.hexdigest(), len(files), total)
