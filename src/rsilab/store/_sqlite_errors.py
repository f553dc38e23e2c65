"""What an SQLite failure means for a person: a full disk, a lock, a damaged database.

Two kinds of damage reach a reader: pages SQLite cannot read (a disk fault, a file copied while
written, bytes overwritten) and rows SQLite reads but rsilab cannot parse (a row edited outside
rsilab). Both become :class:`~rsilab.errors.LabDamaged` naming the table, and the row when it
is known; :func:`damage` lists the page damage ``PRAGMA quick_check`` finds, by table.
"""

from __future__ import annotations

import errno
import os
import re
import sqlite3
from pathlib import Path

from pydantic import ValidationError

from rsilab.errors import LabDamaged, LabError, WriteRefused

HINT = (
    "run `rsilab verify` to list what is damaged, then restore the lab from a backup "
    "(`rsilab backup DEST` makes one)"
)
BUSY_TIMEOUT_S = 30.0
_PAGE = re.compile(r"\b(?:tree page|[Pp]age) (\d+)\b")
_MAX_LINES = 20


def damage(conn: sqlite3.Connection, limit: int = _MAX_LINES) -> list[str]:
    """What ``PRAGMA quick_check`` finds wrong, one line per problem, each prefixed with the
    table (or index) whose page it is where that can be told; empty when it finds nothing."""
    try:
        rows = [str(r[0]) for r in conn.execute(f"PRAGMA quick_check({int(limit)})")]
    except sqlite3.Error as exc:  # too damaged for the check itself: read table by table
        return _unreadable_tables(conn) or [f"the database cannot be read at all: {exc}"]
    if rows == ["ok"]:
        return []
    lines = [line for row in rows for line in row.splitlines() if not line.startswith("***")]
    owners = _page_owners(conn)
    out = []
    for line in lines[:limit]:
        found = _PAGE.search(line)
        owner = owners.get(int(found[1])) if found else None
        out.append(f"{owner}: {line}" if owner else line)
    return out


def _unreadable_tables(conn: sqlite3.Connection) -> list[str]:
    """'table T: <error>' for each table a full read of fails."""
    try:
        names = [
            str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
    except sqlite3.Error:
        return []
    found = []
    for name in names:
        quoted = name.replace('"', '""')
        try:
            for _ in conn.execute(f'SELECT * FROM "{quoted}"'):
                pass
        except sqlite3.Error as exc:
            found.append(f"table {name}: cannot be read ({exc})")
    return found


def _page_owners(conn: sqlite3.Connection) -> dict[int, str]:
    """Page number -> 'table T' or 'index I of table T', as far as SQLite can still tell
    (every page where the ``dbstat`` table exists, else the root pages)."""
    try:
        schema = conn.execute("SELECT name, tbl_name, type, rootpage FROM sqlite_master")
        kinds = {str(n): (str(t), str(k), int(r or 0)) for n, t, k, r in schema.fetchall()}
    except sqlite3.Error:
        return {}

    def label(name: str) -> str:
        table, kind, _ = kinds.get(name, (name, "table", 0))
        return f"index {name} of table {table}" if kind == "index" else f"table {name}"

    owners = {root: label(name) for name, (_, _, root) in kinds.items() if root}
    try:
        for name, page in conn.execute("SELECT name, pageno FROM dbstat"):
            owners[int(page)] = label(str(name))
    except sqlite3.Error:
        pass  # no dbstat here, or it cannot walk the damaged tree: root pages only
    return owners


def damaged_error(path: Path, exc: sqlite3.Error, conn: sqlite3.Connection | None) -> LabDamaged:
    """The error for SQLite's ``exc`` on a damaged database, naming what :func:`damage` finds."""
    found = damage(conn, 3) if conn is not None else []
    table = next(
        (m[1] for f in found if (m := re.match(r"(?:index \S+ of )?table (\S+):", f))), None
    )
    where = f": {found[0]}" if found else ""
    return LabDamaged(f"the lab database {path} is damaged ({exc}){where}", HINT, table=table)


def unparsed_row(path: Path, table: str, row: str, exc: Exception) -> LabDamaged:
    """The error for a stored row of ``table`` that does not parse (``row`` names it)."""
    return LabDamaged(
        f"the lab database {path} holds a row that does not parse: table {table}, row {row}: "
        f"{_first_problem(exc)}",
        HINT,
        table=table,
        row=row,
    )


def _first_problem(exc: Exception) -> str:
    if isinstance(exc, ValidationError) and exc.errors():
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        return f"{where}: {first.get('msg', '')}" if where else str(first.get("msg", ""))
    return f"{type(exc).__name__}: {exc}"


_NEARLY_FULL = 2**20
"""Free bytes under which an SQLite I/O error is taken for a full disk: SQLite reports a
refused write of its WAL index (``-shm``) as SQLITE_IOERR_SHMSIZE, not SQLITE_FULL."""


def _io_error_on_a_full_disk(exc: sqlite3.Error, path: Path) -> bool:
    if not str(getattr(exc, "sqlite_errorname", "")).startswith("SQLITE_IOERR"):
        return False
    try:
        found = os.statvfs(path.parent if not path.is_dir() else path)
    except OSError:
        return False
    return found.f_bavail * found.f_frsize < _NEARLY_FULL


def explain(exc: sqlite3.Error, path: Path, conn: sqlite3.Connection | None = None) -> LabError:
    """The LabError a person reads for SQLite's ``exc`` on the database at ``path``
    (``conn``, when open, lets a damaged one be described)."""
    msg = str(exc).lower()
    if "full" in msg or _io_error_on_a_full_disk(exc, path):
        return WriteRefused.of(path, errno.ENOSPC, note="nothing from this change was recorded")
    if "readonly" in msg or "read-only" in msg or "unable to open" in msg:
        return LabError(
            f"cannot write to the lab database {path}: the file or its folder is read-only",
            "check the permissions of the lab folder, or choose another with --lab",
        )
    if "locked" in msg or "busy" in msg:
        return LabError(
            f"the lab {path} stayed locked by another process for {BUSY_TIMEOUT_S:.0f} s",
            "wait for the other rsilab process to finish, then retry",
        )
    if "not a database" in msg:
        return LabDamaged(
            f"{path} is not a readable rsilab lab database (corrupt or a foreign file: its "
            "first page is not an SQLite database's)",
            f"point --lab at the right folder; if it is the right one, {HINT}",
        )
    if "malformed" in msg or "corrupt" in msg:
        return damaged_error(path, exc, conn)
    return LabError(f"the lab database {path} failed: {exc}", "see `rsilab doctor`")
