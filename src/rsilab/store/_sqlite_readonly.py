"""Reading a lab database without writing a byte: for ``rsilab verify``, ``log``, ``show``
and ``report`` on a lab folder that is read-only (``chmod -R a-w``, a read-only mount, another
user's copy).

SQLite in WAL mode normally writes even to read: it creates ``lab.db-shm`` (and ``-wal``)
beside the database. So a read-only opening tries, in order:

1. ``mode=ro``: works wherever the folder lets SQLite make its shared-memory file, or one is
   there already;
2. ``immutable=1`` when no ``lab.db-wal`` holds anything: then ``lab.db`` alone is the whole
   lab, and no process has it open for writing (a WAL writer keeps that file while open);
3. a private copy of ``lab.db`` and ``lab.db-wal`` in a temporary folder, opened there, when
   the WAL holds commits not yet in ``lab.db`` (a writer killed, or writing through another
   mount): reading the database file alone would miss them.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import tempfile
from pathlib import Path

from rsilab.errors import LabError
from rsilab.store._sqlite_errors import BUSY_TIMEOUT_S, explain


def read_only_connection(path: Path) -> tuple[sqlite3.Connection, Path | None]:
    """A connection that reads the lab database at ``path`` and never writes there, and the
    temporary folder holding the copy it reads (None when it reads ``path`` itself); the
    caller removes that folder when it closes the connection.

    Raises:
        LabError: the database cannot be read this way (the message says why).
    """
    uri = path.resolve().as_uri()
    try:
        return _probed(f"{uri}?mode=ro"), None
    except sqlite3.Error as exc:
        first = exc
    wal = Path(f"{path}-wal")
    if not wal.exists() or wal.stat().st_size == 0:
        try:
            return _probed(f"{uri}?mode=ro&immutable=1"), None
        except sqlite3.Error as exc:
            raise explain(exc, path) from exc
    try:
        return _copied(path, wal)
    except (OSError, sqlite3.Error) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise LabError(
            f"cannot read the lab database {path} without writing: SQLite could not open it "
            f"read-only ({first}), its {wal.name} holds commits not yet in {path.name}, and "
            f"copying both to read them failed ({reason})",
            "copy the lab folder somewhere writable (keep lab.db and lab.db-wal together) and "
            "run the command on the copy",
        ) from exc


def _probed(uri: str) -> sqlite3.Connection:
    conn = sqlite3.connect(
        uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
    )
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except BaseException:
        conn.close()
        raise
    return conn


def _copied(path: Path, wal: Path) -> tuple[sqlite3.Connection, Path]:
    folder = Path(tempfile.mkdtemp(prefix="rsilab-read-"))
    try:
        # a copy is consistent while no one writes the lab: the case here, a folder this
        # process cannot write (a writer through another mount would be read mid-way)
        shutil.copyfile(wal, folder / f"{path.name}-wal")
        shutil.copyfile(path, folder / path.name)
        return _probed((folder / path.name).as_uri()), folder
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def remove_copy(folder: Path | None) -> None:
    """Remove the temporary copy :func:`read_only_connection` made, if any."""
    if folder is not None:
        with contextlib.suppress(OSError):
            shutil.rmtree(folder)
