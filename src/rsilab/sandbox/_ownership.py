"""Lending a workspace to the sandbox user for one run, and taking it back.

When rsilab runs as root, jobs run as an unprivileged uid, which must be able to write the
workspace. Before a run its entries owned by the workspace's owner are given to that uid;
afterwards everything the uid owns there goes back, with set-id bits cleared. Links are never
followed (a job may plant a symlink to any host path), and regular files with several hard
links are not lent: one of the other names could be a host file outside the workspace.

A folder lent to several concurrent jobs (a shared writable mount, or an ``rsilab agent``
workspace whose agent starts jobs in it) is counted: the first loan records the real owner,
each loan lends what that owner holds there (the host may have made entries since an earlier
loan, such as a job's ``runs/<job-id>/`` folder), and the last return restores it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

_lock = threading.Lock()
_loans: dict[Path, tuple[int, tuple[int, int]]] = {}
"""folder -> (jobs holding it, its real owner)."""


def _entries(root: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """Every entry under ``root`` and root itself, by lstat, without following links."""
    yield root, root.lstat()
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            path = Path(folder, name)
            with contextlib.suppress(FileNotFoundError):
                yield path, path.lstat()


def lend(root: Path, uid: int, gid: int) -> None:
    """Give ``root``'s owner's entries to ``uid:gid``; the first concurrent loan records the
    owner, a later one lends what the owner made there since."""
    with _lock:
        count, owner = _loans.get(root, (0, (-1, -1)))
        if count == 0:
            info = root.lstat()
            owner = (info.st_uid, info.st_gid)
        if owner[0] != uid:
            for path, entry in _entries(root):
                if entry.st_uid != owner[0] or stat.S_ISLNK(entry.st_mode):
                    continue
                if stat.S_ISREG(entry.st_mode) and entry.st_nlink > 1:
                    continue
                os.chown(path, uid, gid, follow_symlinks=False)
        _loans[root] = (count + 1, owner)


def restore(root: Path, uid: int) -> None:
    """End one loan of ``root``; the last one gives everything ``uid`` owns there back to the
    real owner and clears set-id bits."""
    with _lock:
        count, owner = _loans.pop(root, (1, (-1, -1)))
        if count > 1:
            _loans[root] = (count - 1, owner)
            return
        if owner[0] < 0:
            return
        for path, entry in _entries(root):
            if entry.st_uid != uid:
                continue
            os.chown(path, owner[0], owner[1], follow_symlinks=False)
            if not stat.S_ISLNK(entry.st_mode) and entry.st_mode & (stat.S_ISUID | stat.S_ISGID):
                os.chmod(path, stat.S_IMODE(entry.st_mode) & ~(stat.S_ISUID | stat.S_ISGID))
