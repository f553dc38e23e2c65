"""``PostgresStore``: a lab's records and ledger in a PostgreSQL database (SQLAlchemy 2 with
psycopg 3), with SQLite's guarantees across machines.

- **Gap-free, serialised ledger.** Every commit takes a transaction-level advisory lock of its
  lab before it reads the head, then appends head + 1; the lock is released by the commit or
  rollback itself. No SEQUENCE is used: a sequence skips numbers on rollback. The table's
  unique constraints (on the sequence number and on the previous hash) make a fork impossible
  to store even for a writer that skipped the lock.
- **Idempotent retries.** Each commit carries a unique event id, stored beside its event. When
  the connection is lost mid-commit (a restart, a network cut) the outcome is unknown; the
  store reconnects and looks the id up: found, the commit landed and is returned as is; absent,
  it rolled back and is run again. So a retry neither loses nor doubles an event.
- **One reconnect window.** A lost server is waited for up to :data:`RECONNECT_S` from the
  first lost connection, by all calls together (:mod:`rsilab.store._pg_window`): once that is
  spent, a later call tries the server once and fails at once with the same line, so a
  process that stops on the error stops within the window, not after a fresh wait per call.
- **Durable.** A server with ``synchronous_commit=off`` is refused when the lab is opened.
- **Same ledger.** Canonical JSON text, record digests and signed checkpoints are those of
  :mod:`rsilab.store.ledger`; the key is found by lab id as for SQLite labs.
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import psycopg
import sqlalchemy as sa
from sqlalchemy import Connection, Engine, event
from sqlalchemy.exc import SQLAlchemyError

from rsilab.errors import LabError, NotFoundError
from rsilab.faults import fault_point
from rsilab.records import Event, EventDraft, Record, record_type
from rsilab.store import keys
from rsilab.store._pg_errors import explain, is_disconnect, is_lost_server, unparsed_row
from rsilab.store._pg_open import (
    CONNECT_TIMEOUT_S,
    check_durable,
    make_engine,
    prepare,
    stay_in_lab,
)
from rsilab.store._pg_schema import INDEXED_FIELDS
from rsilab.store._pg_url import PgLocation, parse_pg_url
from rsilab.store._pg_window import ReconnectWindow
from rsilab.store._staging import apply_revisions, stage_writes
from rsilab.store._write_guard import check_before_first_write
from rsilab.store.base import CHECKPOINT_INTERVAL, Store
from rsilab.store.ledger import (
    GENESIS_HASH,
    Checkpoint,
    StoredEvent,
    StoredRecord,
    build_event,
    canonical_json,
    make_checkpoint,
    sha256_text,
)
from rsilab.store.query import matching_records

RECONNECT_S = 15.0
"""How long a store waits for a server it lost, from the first lost connection and for all its
calls together: a commit trying to learn its outcome, a read repeated while the server
restarts. Any success starts the count again at the next loss."""

T = TypeVar("T")

_PAGE = sa.text("SELECT seq, hash, body FROM events WHERE seq > :after ORDER BY seq LIMIT 5000")


def _page_after(conn: Connection, after: int) -> list[StoredEvent]:
    """One page of stored events after ``after``; pages keep verification's memory small."""
    rows = conn.execute(_PAGE, {"after": after})
    return [StoredEvent(int(seq), str(digest), str(body)) for seq, digest, body in rows]


_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(:lab, 0))"


class PostgresStore(Store):
    """Store in one PostgreSQL database. Use :meth:`open`; ``create=True`` makes a new lab."""

    def __init__(
        self, location: PgLocation, engine: Engine, lab_id: str, read_only: bool = False
    ) -> None:
        super().__init__()
        self._read_only = read_only
        self._location = location
        self._engine = engine
        self._lab_id = lab_id
        self._key = keys.load_key(lab_id)
        self._unsigned_commits = False
        self._write_checked = False  # check_before_first_write, once per process
        self._window = ReconnectWindow(RECONNECT_S, CONNECT_TIMEOUT_S)
        stay_in_lab(engine, lab_id, location.shown)
        event.listen(engine, "do_connect", self._connect)

    @classmethod
    def open(
        cls,
        location: PgLocation | str,
        *,
        create: bool = False,
        lab_id: str | None = None,
        read_only: bool = False,
    ) -> PostgresStore:
        """Open (or with ``create`` make) the lab in the database ``location`` names.

        ``lab_id`` (with ``create``) gives the new lab that id and writes no key: the lab is a
        copy whose key already exists. With ``read_only`` (commands that only read) the server
        refuses every write on the store's connections, :meth:`commit` raises LabError, the
        head is never signed, a lab of an older schema is refused rather than upgraded, and a
        server that may lose acknowledged commits is not refused (nothing is committed).
        Raises LabError: unreachable server, no lab there (or one already, with ``create``), a
        newer schema, ``synchronous_commit=off``.
        """
        if create and read_only:
            raise ValueError("a lab cannot be created read-only")
        where = location if isinstance(location, PgLocation) else parse_pg_url(location)
        engine = make_engine(where, read_only=read_only)
        try:
            with engine.begin() as conn:
                if not read_only:  # a reader commits nothing a crash could lose
                    check_durable(conn, where.shown)
                the_id = prepare(conn, where.shown, create, lab_id, read_only=read_only)
        except SQLAlchemyError as exc:
            engine.dispose()
            raise explain(exc, where.shown, read_only) from exc
        except BaseException:
            engine.dispose()
            raise
        if create and lab_id is None:
            try:
                keys.create_key(the_id)
            except OSError as exc:
                engine.dispose()
                raise LabError(
                    f"cannot write the ledger key to {keys.key_dir()}: {exc.strerror or exc}",
                    "set RSILAB_KEY_DIR to a writable folder outside the lab",
                ) from exc
        return cls(where, engine, the_id, read_only=read_only)

    # -- plumbing ------------------------------------------------------------------------------

    @property
    def lab_id(self) -> str:
        return self._lab_id

    @property
    def location(self) -> PgLocation:
        """The database and artifact folder of the lab."""
        return self._location

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for the lab copier; records are written through commit)."""
        return self._engine

    def _connect(self, dialect: Any, _record: Any, cargs: Any, cparams: dict[str, Any]) -> Any:
        """Make a new connection (the engine's ``do_connect`` hook) within the time the
        reconnect window has left, so one attempt cannot outlast the window; an attempt that
        finds no server opens the window when it began."""
        cparams["connect_timeout"] = self._window.connect_timeout()
        began = time.monotonic()
        try:
            return dialect.connect(*cargs, **cparams)
        except Exception as exc:
            if is_lost_server(exc):
                unanswered = isinstance(exc, psycopg.errors.ConnectionTimeout)
                self._window.failed_to_connect(began, unanswered=unanswered)
            raise

    def _reading(self, read: Callable[[Connection], T], *, writes: bool = False) -> T:
        """``read`` on a fresh connection (in a transaction with ``writes``; ``read`` must
        then be safe to repeat). When the connection cannot be made or is lost (a server
        restarting) it is repeated while the store's reconnect window lasts; a spent window,
        or any other error: LabError (one line)."""
        pause = 0.05
        while True:
            self._window.admit()
            try:
                with self._engine.begin() if writes else self._engine.connect() as conn:
                    result = read(conn)
            except SQLAlchemyError as exc:
                error = explain(exc, self._location.shown, self._read_only)
                if not is_disconnect(exc):
                    raise error from exc
                spent = self._window.lost(error)
                if spent is not None:
                    raise spent from exc
                time.sleep(min(pause, self._window.left()))
                pause = min(pause * 2, 1.0)
                continue
            self._window.reached()
            return result

    def _parse(self, record_id: str, kind: str, body: str) -> Record:
        try:
            return record_type(kind).model_validate_json(body)
        except (ValueError, KeyError) as exc:
            where = self._location.shown
            raise unparsed_row(where, "records", f"{record_id} (kind {kind})", exc) from exc

    def _event(self, seq: int, body: str) -> Event:
        try:
            return Event.model_validate_json(body)
        except ValueError as exc:
            raise unparsed_row(self._location.shown, "events", f"seq {seq}", exc) from exc

    @staticmethod
    def _head(conn: Connection) -> tuple[int, str]:
        row = conn.execute(
            sa.text("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1")
        ).first()
        return (0, GENESIS_HASH) if row is None else (int(row[0]), str(row[1]))

    def _load(self, conn: Connection, record_id: str) -> Record | None:
        row = conn.execute(
            sa.text("SELECT kind, body FROM records WHERE id = :id"), {"id": record_id}
        ).first()
        return None if row is None else self._parse(record_id, str(row[0]), str(row[1]))

    # -- writes --------------------------------------------------------------------------------

    def commit(self, draft: EventDraft, writes: Sequence[Record] = ()) -> Event:
        if self._read_only:
            raise LabError(
                f"the lab {self._location.shown} was opened read-only; nothing was written",
                "open it for writing (a command that changes the lab)",
            )
        if not self._write_checked:
            check_before_first_write(self, self._lab_id, self._key)
            self._write_checked = True
        event_id = uuid.uuid4().hex
        self._window.admit()  # refused at once (nothing sent) while a dead host is not retried
        # The store's window is reset by each lookup that reaches the server; this commit's
        # own bound (from its first lost connection) keeps a server that drops every commit
        # from holding it forever.
        give_up = math.inf
        while True:
            try:
                event = self._commit_once(draft, writes, event_id)
            except SQLAlchemyError as exc:
                if not is_disconnect(exc):
                    raise self._lost(exc, event_id) from exc
                give_up = min(give_up, time.monotonic() + RECONNECT_S)
                spent = self._window.lost(explain(exc, self._location.shown, self._read_only))
                if spent is not None or time.monotonic() > give_up:
                    raise self._lost(exc, event_id, said=spent) from exc
            else:
                self._window.reached()
                return event
            landed = self._landed(event_id, give_up)
            if landed is not None:  # the lost connection's COMMIT went through
                for record, ref in zip(writes, landed.records, strict=True):
                    record.rev = ref.rev
                self._unsigned_commits = True  # close() signs the head, whatever landed
                if self._key is not None:  # the mark outside the lab covers it too
                    text = canonical_json(landed.model_dump(mode="json"))
                    mark = make_checkpoint(self._key, self._lab_id, landed.seq, sha256_text(text))
                    keys.mark_commit(self._lab_id, mark)
                return landed

    def _commit_once(self, draft: EventDraft, writes: Sequence[Record], event_id: str) -> Event:
        checkpoint: Checkpoint | None = None
        mark: Checkpoint | None = None
        with self._engine.begin() as conn:
            conn.execute(sa.text(_LOCK), {"lab": self._lab_id})
            self._fences.check(draft, writes, lambda rid: self._load(conn, rid))
            staged = stage_writes(writes, lambda rid: self._load(conn, rid))
            seq, prev = self._head(conn)
            event, stored = build_event(draft, seq + 1, prev, [s.ref for s in staged])
            for s in staged:
                self._write_record(conn, s.record, s.text, s.is_new)
                conn.execute(
                    sa.text("INSERT INTO event_records VALUES (:r, :s)"),
                    {"r": s.record.id, "s": stored.seq},
                )
            fault_point("commit")
            conn.execute(
                sa.text(
                    "INSERT INTO events (seq, hash, prev_hash, event_id, campaign_id, body) "
                    "VALUES (:seq, :hash, :prev, :eid, :cid, :body)"
                ),
                {"seq": stored.seq, "hash": stored.hash, "prev": prev, "eid": event_id,
                 "cid": event.campaign_id, "body": stored.text},
            )  # fmt: skip
            if self._key is not None:
                mark = make_checkpoint(self._key, self._lab_id, stored.seq, stored.hash)
                if stored.seq % CHECKPOINT_INTERVAL == 0:
                    self._insert_checkpoint(conn, mark)
                    checkpoint = mark
        self._unsigned_commits = checkpoint is None
        apply_revisions(writes, staged)
        if mark is not None:  # every event: see SQLiteStore.commit
            keys.mark_commit(self._lab_id, mark)
        return event

    def _landed(self, event_id: str, give_up: float) -> Event | None:
        """The event committed under ``event_id``, or None when it did not land; waits for
        the server to come back while the reconnect window lasts, and not past ``give_up``.
        Raises LabError when it does not.

        The lookup first takes the lab's lock: the lost connection's transaction holds it
        until the server has committed or rolled it back, so the answer is final (without the
        lock a COMMIT still under way would read as absent and be written twice).
        """
        pause = 0.05
        while True:
            left = min(self._window.left(), give_up - time.monotonic())
            wait_ms = max(1, int(left * 1000))
            try:
                with self._engine.begin() as conn:
                    conn.execute(sa.text(f"SET LOCAL lock_timeout = {wait_ms}"))
                    conn.execute(sa.text(_LOCK), {"lab": self._lab_id})
                    row = conn.execute(
                        sa.text("SELECT seq, body FROM events WHERE event_id = :e"),
                        {"e": event_id},
                    ).first()
            except SQLAlchemyError as exc:
                if not is_disconnect(exc):
                    raise self._lost(exc, event_id, unknown=True) from exc
                spent = self._window.lost(explain(exc, self._location.shown, self._read_only))
                if spent is not None or time.monotonic() > give_up:
                    raise self._lost(exc, event_id, unknown=True, said=spent) from exc
                time.sleep(max(0.0, min(pause, self._window.left(), give_up - time.monotonic())))
                pause = min(pause * 2, 1.0)
                continue
            self._window.reached()
            return None if row is None else self._event(int(row[0]), str(row[1]))

    def _lost(
        self,
        exc: SQLAlchemyError,
        event_id: str,
        *,
        unknown: bool = False,
        said: LabError | None = None,
    ) -> LabError:
        """The LabError of a commit that failed on ``exc``: ``said`` (a spent reconnect
        window's line) or what ``exc`` means, and whether the commit's outcome is unknown."""
        error = said or explain(exc, self._location.shown, self._read_only)
        if unknown or is_disconnect(exc):
            error.message += (
                f"; the commit's outcome is unknown (event id {event_id}): check "
                "`rsilab events` once the server is back before repeating it"
            )
        return error

    @staticmethod
    def _write_record(conn: Connection, record: Record, body: str, is_new: bool) -> None:
        values = {"id": record.id, "kind": record.KIND, "cid": record.campaign_id,
                  "rev": record.rev, "body": body}  # fmt: skip
        if is_new:
            sql = "INSERT INTO records (id, kind, campaign_id, rev, body) "
            sql += "VALUES (:id, :kind, :cid, :rev, :body)"
        else:
            sql = "UPDATE records SET rev = :rev, body = :body WHERE id = :id"
        conn.execute(sa.text(sql), values)

    @staticmethod
    def _insert_checkpoint(conn: Connection, cp: Checkpoint) -> None:
        conn.execute(
            sa.text(
                "INSERT INTO checkpoints VALUES (:seq, :head, :mac, :at) ON CONFLICT (seq) "
                "DO UPDATE SET head_hash = excluded.head_hash, mac = excluded.mac, at = excluded.at"
            ),
            {"seq": cp.seq, "head": cp.head_hash, "mac": cp.mac, "at": cp.at},
        )

    def checkpoint_now(self) -> Checkpoint | None:
        key = self._key
        if key is None or self._read_only:
            return None

        def sign_head(conn: Connection) -> Checkpoint:
            # Safe to repeat after a lost connection: it signs the head as it is then, and a
            # checkpoint of the same seq replaces the earlier one.
            conn.execute(sa.text(_LOCK), {"lab": self._lab_id})
            seq, head = self._head(conn)
            made = make_checkpoint(key, self._lab_id, seq, head)
            self._insert_checkpoint(conn, made)
            return made

        cp = self._reading(sign_head, writes=True)
        self._unsigned_commits = False
        keys.mark_commit(self._lab_id, cp)
        return cp

    def close(self) -> None:
        """Sign the head if this process wrote events since the last checkpoint, then close."""
        if self._unsigned_commits:
            with contextlib.suppress(LabError):
                self.checkpoint_now()
        self._engine.dispose()

    # -- reads ---------------------------------------------------------------------------------

    def get(self, record_id: str) -> Record:
        record = self._reading(lambda conn: self._load(conn, record_id))
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
        sql, params = "SELECT id, kind, body FROM records WHERE true", dict[str, object]()
        if kind is not None:
            sql, params["kind"] = sql + " AND kind = :kind", kind
        if campaign_id is not None:
            sql, params["cid"] = sql + " AND campaign_id = :cid", campaign_id
        for n, (name, wanted) in enumerate((fields or {}).items()):
            # Only the indexed fields are matched in SQL (the others would cast every row's
            # body); matching_records still decides every row.
            if isinstance(wanted, str) and name in INDEXED_FIELDS:
                sql += f" AND body::jsonb ->> '{name}' = :f{n}"
                params[f"f{n}"] = wanted
        if text and text.isascii():  # ILIKE may fold more than ASCII; matching_records decides
            escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            sql, params["pat"] = sql + " AND body ILIKE :pat", f"%{escaped}%"
        rows = self._reading(
            lambda conn: conn.execute(sa.text(sql + " ORDER BY pos"), params).all()
        )
        try:
            return matching_records(
                [(str(k), str(b)) for _, k, b in rows],
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
        sql, params = "SELECT e.seq, e.body FROM events e", dict[str, object](after=after)
        if record_id is not None:
            sql, params["rid"] = (
                sql + " JOIN event_records r ON r.seq = e.seq AND r.record_id = :rid",
                record_id,
            )
        sql += " WHERE e.seq > :after"
        if campaign_id is not None:
            sql, params["cid"] = sql + " AND e.campaign_id = :cid", campaign_id
        sql += " ORDER BY e.seq"
        if limit is not None:
            sql, params["limit"] = sql + " LIMIT :limit", limit
        rows = self._reading(lambda conn: conn.execute(sa.text(sql), params).all())
        return [self._event(int(seq), str(body)) for seq, body in rows]

    def head(self) -> tuple[int, str]:
        return self._reading(self._head)

    def stored_events(self, after: int = 0) -> Iterator[StoredEvent]:
        last = after
        while True:
            page = self._reading(functools.partial(_page_after, after=last))
            if not page:
                return
            yield from page
            last = page[-1].seq

    def stored_records(self) -> Iterator[StoredRecord]:
        every = sa.text("SELECT id, kind, rev, body FROM records ORDER BY pos")
        rows = self._reading(lambda conn: conn.execute(every).all())
        for rid, kind, rev, body in rows:
            yield StoredRecord(str(rid), str(kind), int(rev), str(body))

    def checkpoints(self) -> list[Checkpoint]:
        every = sa.text("SELECT seq, head_hash, mac, at FROM checkpoints ORDER BY seq")
        rows = self._reading(lambda conn: conn.execute(every).all())
        return [Checkpoint(int(s), str(h), str(m), str(a)) for s, h, m, a in rows]
