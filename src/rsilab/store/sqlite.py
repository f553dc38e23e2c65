"""``SQLiteStore``: the embedded default backend (one file, WAL mode, busy timeout).

Safe for several threads (one connection behind a lock) and several processes on one
machine: every commit runs under ``BEGIN IMMEDIATE``, which takes SQLite's write lock before
the head of the ledger is read, so two writers can never fork the chain. Readers do not block
writers (WAL). Low-level SQLite failures become :class:`~rsilab.errors.LabError` with a hint;
a failed commit is rolled back and leaves what was recorded intact.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rsilab.errors import LabError, NotFoundError
from rsilab.faults import fault_point
from rsilab.records import SCHEMA_VERSION, Event, EventDraft, Record, record_type, utc_now
from rsilab.store import keys
from rsilab.store._sqlite_errors import BUSY_TIMEOUT_S, damage, explain, unparsed_row
from rsilab.store._sqlite_file import identity, still_there
from rsilab.store._sqlite_readonly import read_only_connection, remove_copy
from rsilab.store._sqlite_schema import ensure_indexes, lab_meta, migrate
from rsilab.store._staging import apply_revisions, stage_writes
from rsilab.store._write_guard import check_before_first_write
from rsilab.store.base import CHECKPOINT_INTERVAL, Store
from rsilab.store.ledger import (
    GENESIS_HASH,
    Checkpoint,
    StoredEvent,
    StoredRecord,
    build_event,
    make_checkpoint,
)
from rsilab.store.query import matching_records

_FIELD_NAME = re.compile(r"[a-z_][a-z0-9_]*")
"""A record field name safe to write into a JSON path of the SQL text."""


class SQLiteStore(Store):
    """Store in one SQLite file. Use :meth:`open`; ``create=True`` makes a new lab."""

    def __init__(
        self,
        path: Path,
        conn: sqlite3.Connection,
        lab_id: str,
        *,
        read_only: bool = False,
        copy: Path | None = None,
    ) -> None:
        super().__init__()
        self._path = path
        self._conn = conn
        self._lab_id = lab_id
        self._read_only = read_only
        self._copy = copy  # the private copy a read-only opening reads, removed on close
        self._lock = threading.RLock()
        self._key = keys.load_key(lab_id)
        self._unsigned_commits = False
        self._write_checked = False  # check_before_first_write, once per process
        self._where = Path(os.path.abspath(path))  # a later chdir must not move it
        self._opened = identity(self._where)
        self._gone: LabError | None = None

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path, *, create: bool = False, read_only: bool = False) -> SQLiteStore:
        """Open (or with ``create`` make) the lab database at ``path``.

        With ``read_only`` nothing is written, to the lab folder or the key folder (see
        :mod:`rsilab.store._sqlite_readonly`), and :meth:`commit` raises LabError.

        Raises LabError: missing file, foreign or corrupt file, a newer schema, unwritable;
        read-only: an older schema (upgrading writes), or a database that cannot be read
        without writing.
        """
        path = Path(path)
        if not create and not path.exists():
            raise LabError(f"no lab database at {path}", "create one with `rsilab init`")
        if read_only and not create:
            return cls._open_read_only(path)
        if create and path.exists():
            if not _holds_nothing(path):
                raise LabError(f"a lab already exists at {path}", "use it, or choose another --lab")
            # an `rsilab init` killed before its first commit left an empty database: it holds
            # nothing to lose, and no other command can use it
            for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                leftover.unlink(missing_ok=True)
        try:
            conn = sqlite3.connect(
                path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise explain(exc, path) from exc
        try:
            lab_id = cls._prepare(conn, path, create)
        except sqlite3.Error as exc:
            error = explain(exc, path, conn)
            conn.close()
            raise error from exc
        except (ValueError, KeyError, TypeError) as exc:  # unparseable rows met while migrating
            conn.close()
            raise LabError(
                f"the lab at {path} could not be upgraded: a stored row is malformed ({exc}); "
                "the database was left as it was",
                "run `rsilab verify` with the rsilab that wrote it, or restore a backup",
            ) from exc
        except BaseException:
            conn.close()
            raise
        if create:
            try:
                keys.create_key(lab_id)
            except OSError as exc:
                conn.close()
                # the database made above holds no event: left, it would be a lab without a
                # key that a second `rsilab init` refuses and other commands write unsigned
                for made in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                    made.unlink(missing_ok=True)
                raise LabError(
                    f"cannot write the ledger key to {keys.key_dir()}: {exc.strerror or exc}",
                    "set RSILAB_KEY_DIR to a writable folder outside the lab",
                ) from exc
        return cls(path, conn, lab_id)

    @classmethod
    def _open_read_only(cls, path: Path) -> SQLiteStore:
        conn, copy = read_only_connection(path)
        try:
            lab_id, version = lab_meta(conn, path)
            if version < SCHEMA_VERSION:
                raise LabError(
                    f"the lab at {path} has schema version {version}, older than this "
                    f"rsilab's ({SCHEMA_VERSION}), and upgrading it would write to it; it was "
                    "left as it was",
                    "run any rsilab command on it where it can be written (opening it there "
                    "upgrades it, keeping a copy of the old file), or use the rsilab that wrote it",
                )
        except sqlite3.Error as exc:
            error = explain(exc, path, conn)
            conn.close()
            remove_copy(copy)
            raise error from exc
        except BaseException:
            conn.close()
            remove_copy(copy)
            raise
        return cls(path, conn, lab_id, read_only=True, copy=copy)

    @staticmethod
    def _prepare(conn: sqlite3.Connection, path: Path, create: bool) -> str:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        # WAL with synchronous=FULL: a commit is on the disk when it returns, so not even a
        # power cut loses an acknowledged event (NORMAL survives a killed process only); the
        # rule the PostgreSQL store keeps by refusing synchronous_commit=off.
        conn.execute("PRAGMA synchronous = FULL")
        if create:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("BEGIN IMMEDIATE")
            migrate(conn, 0, SCHEMA_VERSION)
            ensure_indexes(conn)
            lab_id = f"lab-{secrets.token_hex(8)}"
            conn.executemany(
                "INSERT INTO meta VALUES (?, ?)",
                [("app", "rsilab"), ("lab_id", lab_id), ("created_at", utc_now())],
            )
            conn.execute("COMMIT")
            return lab_id
        lab_id, version = lab_meta(conn, path)
        conn.execute("PRAGMA journal_mode = WAL")
        if version < SCHEMA_VERSION:
            SQLiteStore._upgrade(conn, path, version)
        with contextlib.suppress(sqlite3.OperationalError):  # read-only: slower, still right
            ensure_indexes(conn)
        return lab_id

    @staticmethod
    def _upgrade(conn: sqlite3.Connection, path: Path, version: int) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Under the write lock: another process may have upgraded since ``version`` was read.
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            version = int(row[0]) if row else version
            if version < SCHEMA_VERSION:
                backup_path = path.with_name(f"{path.name}.v{version}.bak")
                # A second connection reads the committed state; ``conn`` holds the write lock.
                with (
                    contextlib.closing(sqlite3.connect(path)) as source,
                    contextlib.closing(sqlite3.connect(backup_path)) as backup,
                ):
                    source.backup(backup)
                migrate(conn, version, SCHEMA_VERSION)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    # -- Store primitives ----------------------------------------------------------------------

    @property
    def lab_id(self) -> str:
        return self._lab_id

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    @contextlib.contextmanager
    def _sqlite_errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise explain(exc, self._path, self._conn) from exc

    def damage(self) -> list[str]:
        """The damage SQLite's own check finds in the database file, by table; empty when
        none (see :func:`rsilab.store._sqlite_errors.damage`)."""
        with self._lock:
            return damage(self._conn)

    def _parse(self, record_id: str, kind: str, text: str) -> Record:
        try:
            return record_type(kind).model_validate_json(text)
        except (ValueError, KeyError) as exc:  # ValidationError and JSONDecodeError included
            raise unparsed_row(self._path, "records", f"{record_id} (kind {kind})", exc) from exc

    def _load(self, record_id: str) -> Record | None:
        row = self._conn.execute(
            "SELECT kind, body FROM records WHERE id = ?", (record_id,)
        ).fetchone()
        if row is None:
            return None
        return self._parse(record_id, str(row[0]), str(row[1]))

    def _head(self) -> tuple[int, str]:
        row = self._conn.execute(
            "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        return (0, GENESIS_HASH) if row is None else (int(row[0]), str(row[1]))

    def commit(self, draft: EventDraft, writes: Sequence[Record] = ()) -> Event:
        if self._read_only:
            raise LabError(
                f"the lab at {self._path} was opened read-only; nothing was written",
                "open it for writing (a command that changes the lab) where it can be written",
            )
        checkpoint: Checkpoint | None = None
        mark: Checkpoint | None = None
        if not self._write_checked:
            with self._lock, self._sqlite_errors():
                check_before_first_write(self, self._lab_id, self._key)
            self._write_checked = True
        with self._lock, self._sqlite_errors():
            self._same_file()
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._fences.check(draft, writes, self._load)
                staged = stage_writes(writes, self._load)
                seq, prev = self._head()
                event, stored = build_event(draft, seq + 1, prev, [s.ref for s in staged])
                for s in staged:
                    self._write_record(s.record, s.text, s.is_new)
                    self._conn.execute(
                        "INSERT INTO event_records VALUES (?, ?)", (s.record.id, stored.seq)
                    )
                fault_point("commit")
                self._conn.execute(
                    "INSERT INTO events (seq, hash, campaign_id, body) VALUES (?, ?, ?, ?)",
                    (stored.seq, stored.hash, event.campaign_id, stored.text),
                )
                if self._key is not None:
                    mark = make_checkpoint(self._key, self._lab_id, stored.seq, stored.hash)
                    if stored.seq % CHECKPOINT_INTERVAL == 0:
                        self._insert_checkpoint(mark)
                        checkpoint = mark
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            self._unsigned_commits = checkpoint is None
        apply_revisions(writes, staged)
        if mark is not None:
            # every event, not every CHECKPOINT_INTERVAL: an unsigned tail could be cut or
            # rewritten unnoticed by anyone who can write lab.db
            keys.mark_commit(self._lab_id, mark)
        return event

    def _same_file(self) -> None:
        """LabError, before a write, once lab.db is no longer the file this store opened
        (see :mod:`rsilab.store._sqlite_file`); the same error for every later write."""
        if self._gone is None:
            try:
                still_there(self._where, self._opened, self._conn)
            except LabError as exc:
                self._gone = exc
        if self._gone is not None:
            raise self._gone

    def _write_record(self, record: Record, text: str, is_new: bool) -> None:
        if is_new:
            self._conn.execute(
                "INSERT INTO records (id, kind, campaign_id, rev, body) VALUES (?, ?, ?, ?, ?)",
                (record.id, record.KIND, record.campaign_id, record.rev, text),
            )
        else:
            self._conn.execute(
                "UPDATE records SET rev = ?, body = ? WHERE id = ?", (record.rev, text, record.id)
            )

    def _insert_checkpoint(self, cp: Checkpoint) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO checkpoints VALUES (?, ?, ?, ?)",
            (cp.seq, cp.head_hash, cp.mac, cp.at),
        )

    def get(self, record_id: str) -> Record:
        with self._lock, self._sqlite_errors():
            record = self._load(record_id)
        if record is None:
            raise NotFoundError("record", record_id)
        return record

    def query(
        self,
        kind: str | None = None,
        *,
        campaign_id: str | None = None,
        fields: Mapping[str, Any] | None = None,
        text: str | None = None,
        limit: int | None = None,
    ) -> list[Record]:
        sql, params = "SELECT id, kind, body FROM records WHERE 1=1", list[object]()
        if kind is not None:
            sql, params = sql + " AND kind = ?", [*params, kind]
        if campaign_id is not None:
            sql, params = sql + " AND campaign_id = ?", [*params, campaign_id]
        for name, wanted in (fields or {}).items():
            # A string field is matched in SQL too (by an index for INDEXED_FIELDS), so rows
            # that cannot match are never parsed; record_matches still decides every row.
            if isinstance(wanted, str) and _FIELD_NAME.fullmatch(name):
                sql += f" AND json_extract(body, '$.{name}') = ?"
                params.append(str(wanted))
        if text and text.isascii():  # LIKE folds ASCII case only; record_matches does the rest
            escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            sql, params = sql + " AND body LIKE ? ESCAPE '\\'", [*params, f"%{escaped}%"]
        sql += " ORDER BY rowid"
        with self._lock, self._sqlite_errors():
            rows = self._conn.execute(sql, params).fetchall()
        try:
            return matching_records(
                [(k, b) for _, k, b in rows],
                kind=kind, campaign_id=campaign_id, fields=fields, text=text, limit=limit,
            )  # fmt: skip
        except (ValueError, KeyError):
            for record_id, row_kind, body in rows:  # name the row that does not parse
                self._parse(str(record_id), str(row_kind), str(body))
            raise

    def events(
        self,
        *,
        after: int = 0,
        campaign_id: str | None = None,
        record_id: str | None = None,
        limit: int | None = None,
    ) -> list[Event]:
        sql, params = "SELECT e.seq, e.body FROM events e", list[object]()
        if record_id is not None:
            sql += " JOIN event_records r ON r.seq = e.seq AND r.record_id = ?"
            params.append(record_id)
        sql += " WHERE e.seq > ?"
        params.append(after)
        if campaign_id is not None:
            sql += " AND e.campaign_id = ?"
            params.append(campaign_id)
        sql += " ORDER BY e.seq"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self._lock, self._sqlite_errors():
            rows = self._conn.execute(sql, params).fetchall()
        return [self._event(int(seq), str(body)) for seq, body in rows]

    def _event(self, seq: int, text: str) -> Event:
        try:
            return Event.model_validate_json(text)
        except ValueError as exc:
            raise unparsed_row(self._path, "events", f"seq {seq}", exc) from exc

    def head(self) -> tuple[int, str]:
        with self._lock, self._sqlite_errors():
            return self._head()

    def stored_events(self, after: int = 0) -> Iterator[StoredEvent]:
        last = after
        while True:  # in pages, so verifying a large ledger needs little memory
            with self._lock, self._sqlite_errors():
                rows = self._conn.execute(
                    "SELECT seq, hash, body FROM events WHERE seq > ? ORDER BY seq LIMIT 5000",
                    (last,),
                ).fetchall()
            if not rows:
                return
            for seq, digest, text in rows:
                yield StoredEvent(int(seq), str(digest), str(text))
            last = int(rows[-1][0])

    def stored_records(self) -> Iterator[StoredRecord]:
        with self._lock, self._sqlite_errors():
            rows = self._conn.execute("SELECT id, kind, rev, body FROM records").fetchall()
        for rid, kind, rev, text in rows:
            yield StoredRecord(str(rid), str(kind), int(rev), str(text))

    def checkpoints(self) -> list[Checkpoint]:
        with self._lock, self._sqlite_errors():
            rows = self._conn.execute(
                "SELECT seq, head_hash, mac, at FROM checkpoints ORDER BY seq"
            ).fetchall()
        return [Checkpoint(int(s), str(h), str(m), str(a)) for s, h, m, a in rows]

    def checkpoint_now(self) -> Checkpoint | None:
        if self._key is None or self._read_only:
            return None
        with self._lock, self._sqlite_errors():
            self._same_file()
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                seq, head = self._head()
                cp = make_checkpoint(self._key, self._lab_id, seq, head)
                self._insert_checkpoint(cp)
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            self._unsigned_commits = False
        keys.mark_commit(self._lab_id, cp)
        return cp

    def close(self) -> None:
        """Sign the head if this process wrote events since the last checkpoint, then close."""
        with self._lock:
            if self._unsigned_commits:
                with contextlib.suppress(LabError):
                    self.checkpoint_now()
            self._conn.close()
            remove_copy(self._copy)


def _holds_nothing(path: Path) -> bool:
    """Whether the file at ``path`` is empty or an SQLite database without a single table
    (what a creation killed before its first commit leaves); False for anything else,
    unreadable files included."""
    try:
        if path.stat().st_size == 0 and not Path(f"{path}-wal").exists():
            return True
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            return int(conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]) == 0
    except (OSError, sqlite3.Error):
        return False
