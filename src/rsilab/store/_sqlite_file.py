"""Is the database a process has open still the file at the lab's path?

SQLite keeps writing into the file it opened. When lab.db is removed, moved (the lab folder
with it) or replaced by another file while a process has it open, that process's commits
land in a file nobody will find again, and it exits 0: everything it recorded is lost
silently. So each write transaction compares the device and inode of the path with those of
the file opened (one ``stat``), and a mismatch refuses the write with one line naming the path.

What this process's open database holds is then the only copy of what it recorded (lab.db
removed) or newer than the file now at the path (lab.db replaced by an older copy): it is
saved beside the path first, through the open connection, so no recorded event is lost.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from rsilab.errors import LabError

Identity = tuple[int, int]
"""A file's device and inode numbers."""


def identity(path: Path) -> Identity | None:
    """The device and inode of the file at ``path``; None when there is none."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_dev, found.st_ino)


def still_there(path: Path, opened: Identity | None, conn: sqlite3.Connection) -> None:
    """Return when ``path`` is still the file opened (``opened``, None when that could not
    be told: never the same); otherwise save what ``conn`` holds beside it and raise
    LabError saying so."""
    now = identity(path)
    if now is not None and now == opened:
        return
    what = "was removed or moved" if now is None else "was replaced by another file"
    saved = _rescue(path, conn)
    kept = (
        f"what this process recorded is saved in {saved}"
        if saved is not None
        else "what this process recorded could not be saved beside it (its folder is gone; "
        "a folder that was moved took it along)"
    )
    raise LabError(
        f"the lab database {path} {what} while this process had it open; nothing more was "
        f"written, and {kept}",
        "put lab.db back where it was, or replace it by the saved copy (remove the lab.db-wal "
        "and lab.db-shm beside it first); then run the command again",
    )


def _rescue(path: Path, conn: sqlite3.Connection) -> Path | None:
    """Copy ``conn``'s database to a new file beside ``path``; None when that fails."""
    for n in range(1, 100):
        target = path.with_name(f"{path.name}.orphaned-{os.getpid()}-{n}")
        try:
            with open(target, "xb"):  # claims the name: never overwrite anything
                pass
        except FileExistsError:
            continue
        except OSError:
            return None
        try:
            with contextlib.closing(sqlite3.connect(target)) as copy:
                conn.backup(copy)
        except (OSError, sqlite3.Error):
            target.unlink(missing_ok=True)
            return None
        return target
    return None
