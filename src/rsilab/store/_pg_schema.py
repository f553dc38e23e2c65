"""The PostgreSQL layout and its migrations, one step per schema version.

The versions are rsilab's record schema versions (:data:`rsilab.records.SCHEMA_VERSION`), the
same series as SQLite's. PostgreSQL labs exist from :data:`FIRST_VERSION` on: a new lab runs
the first step, which makes the whole current layout; a later version that only changes record
shapes has no step here, yet still moves the stored version so that an older rsilab refuses
the lab. PostgreSQL runs DDL inside transactions, so a step that fails leaves the lab as it
was (no backup copy is needed, unlike SQLite's file copy). A lab from a newer version is
refused, never touched.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection, text

FIRST_VERSION = 3
"""The first schema version a PostgreSQL lab can have."""

MIGRATIONS: dict[int, Callable[[Connection], None]] = {}
"""Step that brings a database from version ``n - 1`` to ``n``; absent: nothing to change."""


def _step(version: int) -> Callable[[Callable[[Connection], None]], None]:
    def register(fn: Callable[[Connection], None]) -> None:
        MIGRATIONS[version] = fn

    return register


@_step(FIRST_VERSION)
def _create(conn: Connection) -> None:
    # ``body`` is TEXT, not JSONB: the ledger hashes the exact canonical text, which JSONB
    # would re-serialise. ``pos`` orders records by creation (identity values may skip on a
    # rollback; only their order matters). The ledger's sequence is NOT a SEQUENCE, which
    # skips numbers on rollback: the store computes head + 1 under a per-lab lock, and the
    # unique constraints make a fork (two events after one head) impossible to store.
    for statement in (
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        """CREATE TABLE records (
            pos BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
            id TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            campaign_id TEXT,
            rev INTEGER NOT NULL,
            body TEXT NOT NULL
        )""",
        "CREATE INDEX records_kind_campaign ON records (kind, campaign_id)",
        "CREATE INDEX records_subject_id ON records (kind, (body::jsonb ->> 'subject_id'))",
        "CREATE INDEX records_experiment_id ON records (kind, (body::jsonb ->> 'experiment_id'))",
        """CREATE TABLE events (
            seq BIGINT PRIMARY KEY CHECK (seq > 0),
            hash TEXT NOT NULL,
            prev_hash TEXT NOT NULL UNIQUE,
            event_id TEXT NOT NULL UNIQUE,
            campaign_id TEXT,
            body TEXT NOT NULL
        )""",
        "CREATE INDEX events_campaign ON events (campaign_id, seq)",
        """CREATE TABLE event_records (
            record_id TEXT NOT NULL,
            seq BIGINT NOT NULL,
            PRIMARY KEY (record_id, seq)
        )""",
        """CREATE TABLE checkpoints (
            seq BIGINT PRIMARY KEY,
            head_hash TEXT NOT NULL,
            mac TEXT NOT NULL,
            at TEXT NOT NULL
        )""",
    ):
        conn.execute(text(statement))


INDEXED_FIELDS = ("subject_id", "experiment_id")
"""Record fields with an expression index (made by the first step), which queries use."""


def migrate(conn: Connection, current: int, target: int) -> None:
    """Run steps ``current + 1 .. target`` inside the caller's transaction and store ``target``."""
    for version in range(current + 1, target + 1):
        step = MIGRATIONS.get(version)
        if step is not None:
            step(conn)
    conn.execute(
        text(
            "INSERT INTO meta (key, value) VALUES ('schema_version', :v) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        ),
        {"v": str(target)},
    )
