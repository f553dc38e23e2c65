"""The SQLite layout and its migrations, one step per schema version.

A new lab runs every step; an older lab runs the steps it lacks, after a backup copy of the
database is written beside it. A lab from a newer version is refused, never touched.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

from rsilab.errors import LabError
from rsilab.records import SCHEMA_VERSION

MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {}
"""Step that brings a database from version ``n - 1`` to ``n``."""


def _step(version: int) -> Callable[[Callable[[sqlite3.Connection], None]], None]:
    def register(fn: Callable[[sqlite3.Connection], None]) -> None:
        MIGRATIONS[version] = fn

    return register


@_step(1)
def _create_v1(conn: sqlite3.Connection) -> None:
    # Statement by statement: executescript() would commit the caller's transaction.
    script = """
        CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE records (
            id TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            campaign_id TEXT,
            rev INTEGER NOT NULL,
            body TEXT NOT NULL
        );
        CREATE INDEX records_kind_campaign ON records (kind, campaign_id);
        CREATE TABLE events (
            seq INTEGER PRIMARY KEY,
            hash TEXT NOT NULL,
            campaign_id TEXT,
            body TEXT NOT NULL
        );
        CREATE INDEX events_campaign ON events (campaign_id, seq);
        CREATE TABLE checkpoints (
            seq INTEGER PRIMARY KEY,
            head_hash TEXT NOT NULL,
            mac TEXT NOT NULL,
            at TEXT NOT NULL
        );
        """
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


@_step(2)
def _index_event_records(conn: sqlite3.Connection) -> None:
    """Version 2 indexes which events wrote which record, so a record's history is one query."""
    conn.execute(
        "CREATE TABLE event_records (record_id TEXT NOT NULL, seq INTEGER NOT NULL, "
        "PRIMARY KEY (record_id, seq))"
    )
    rows = conn.execute("SELECT seq, body FROM events ORDER BY seq").fetchall()
    for seq, body in rows:
        for ref in json.loads(body).get("records", []):
            conn.execute("INSERT OR IGNORE INTO event_records VALUES (?, ?)", (ref["id"], seq))


@_step(3)
def _direction_statuses(conn: sqlite3.Connection) -> None:
    """Version 3 gives directions the statuses of the research DAG and a status history.

    No row is rewritten: the ledger holds the digest of every stored record, so rewriting
    ``concluded`` or ``abandoned`` would make ``rsilab verify`` report tampering. Those labels
    are read as ``exhausted`` (``LEGACY_DIRECTION_STATES``). The version still moves, so an
    older rsilab refuses a lab holding the new shapes instead of failing on them.
    """
    del conn


def lab_meta(conn: sqlite3.Connection, path: Path) -> tuple[str, int]:
    """The lab id and schema version of the lab database ``conn`` reads, read without
    writing. Raises LabError: no tables yet, not an rsilab lab, a newer schema."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not tables:
        raise LabError(
            f"{path} is an empty database, not yet a lab (an `rsilab init` cut short?)",
            "run `rsilab init` again: it replaces an empty database",
        )
    if "meta" not in tables:
        raise LabError(
            f"{path} is an SQLite database but not an rsilab lab",
            "point --lab at an rsilab lab folder, or create one with `rsilab init`",
        )
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    if meta.get("app") != "rsilab" or "lab_id" not in meta:
        raise LabError(f"{path} is not an rsilab lab (foreign metadata)", "check --lab")
    version = int(meta.get("schema_version", "0"))
    if version > SCHEMA_VERSION:
        raise LabError(
            f"the lab at {path} has schema version {version}, newer than this rsilab "
            f"understands ({SCHEMA_VERSION}); it was left untouched",
            "upgrade rsilab to open it",
        )
    return str(meta["lab_id"]), version


INDEXED_FIELDS = ("subject_id", "experiment_id")
"""Record fields the tools filter on most (an experiment's evaluations, its jobs): each gets an
index on ``(kind, json_extract(body, '$.<field>'))``, which :meth:`SQLiteStore.query` uses."""


def ensure_indexes(conn: sqlite3.Connection) -> None:
    """Create the field indexes a lab lacks (:data:`INDEXED_FIELDS`).

    Not a schema step: an index changes no stored shape, so the schema version stays and an
    older rsilab still opens the lab (SQLite keeps the index current whoever writes). Raises
    ``sqlite3.OperationalError`` when the database cannot be written (the caller goes on
    without the index: queries are only slower).
    """
    for field in INDEXED_FIELDS:
        conn.execute(
            f"CREATE INDEX IF NOT EXISTS records_{field} "
            f"ON records (kind, json_extract(body, '$.{field}'))"
        )


def migrate(conn: sqlite3.Connection, current: int, target: int) -> None:
    """Run steps ``current + 1 .. target`` inside the caller's transaction."""
    for version in range(current + 1, target + 1):
        MIGRATIONS[version](conn)
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (str(target),),
    )
