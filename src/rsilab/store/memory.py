"""``MemoryStore``: the Store contracts in one process's memory, for tests and dry runs.

It keeps the same canonical text as SQLite, so hashing and verification behave identically;
nothing survives the process.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from rsilab.errors import NotFoundError
from rsilab.records import Event, EventDraft, Record, record_type
from rsilab.store._staging import apply_revisions, stage_writes
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


class MemoryStore(Store):
    """Thread-safe in-memory store. ``key`` enables signed checkpoints."""

    def __init__(self, key: bytes | None = None) -> None:
        super().__init__()
        self._lock = threading.RLock()
        self._lab_id = f"mem-{secrets.token_hex(6)}"
        self._key = key
        self._records: dict[str, StoredRecord] = {}
        self._order: list[str] = []
        self._events: list[StoredEvent] = []
        self._checkpoints: list[Checkpoint] = []

    @property
    def lab_id(self) -> str:
        return self._lab_id

    def _load(self, record_id: str) -> Record | None:
        stored = self._records.get(record_id)
        if stored is None:
            return None
        return record_type(stored.kind).model_validate_json(stored.text)

    def commit(self, draft: EventDraft, writes: Sequence[Record] = ()) -> Event:
        with self._lock:
            self._fences.check(draft, writes, self._load)
            staged = stage_writes(writes, self._load)
            seq, prev = self.head()
            event, stored = build_event(draft, seq + 1, prev, [s.ref for s in staged])
            for s in staged:
                if s.is_new:
                    self._order.append(s.record.id)
                self._records[s.record.id] = StoredRecord(
                    s.record.id, s.record.KIND, s.record.rev, s.text
                )
            self._events.append(stored)
            if self._key is not None and stored.seq % CHECKPOINT_INTERVAL == 0:
                self._checkpoints.append(
                    make_checkpoint(self._key, self._lab_id, stored.seq, stored.hash)
                )
            apply_revisions(writes, staged)
            return event

    def get(self, record_id: str) -> Record:
        with self._lock:
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
        with self._lock:
            rows = [(self._records[i].kind, self._records[i].text) for i in self._order]
        return matching_records(
            rows, kind=kind, campaign_id=campaign_id, fields=fields, text=text, limit=limit
        )

    def events(
        self,
        *,
        after: int = 0,
        campaign_id: str | None = None,
        record_id: str | None = None,
        limit: int | None = None,
    ) -> list[Event]:
        with self._lock:
            rows = self._events[max(after, 0) :]
        out: list[Event] = []
        for row in rows:
            if limit is not None and len(out) >= limit:
                break
            event = Event.model_validate_json(row.text)
            if campaign_id is not None and event.campaign_id != campaign_id:
                continue
            if record_id is not None and all(r.id != record_id for r in event.records):
                continue
            out.append(event)
        return out

    def head(self) -> tuple[int, str]:
        with self._lock:
            if not self._events:
                return 0, GENESIS_HASH
            last = self._events[-1]
            return last.seq, last.hash

    def stored_events(self, after: int = 0) -> Iterator[StoredEvent]:
        with self._lock:
            rows = list(self._events[max(after, 0) :])
        yield from rows

    def stored_records(self) -> Iterator[StoredRecord]:
        with self._lock:
            rows = list(self._records.values())
        yield from rows

    def checkpoints(self) -> list[Checkpoint]:
        with self._lock:
            return list(self._checkpoints)

    def checkpoint_now(self) -> Checkpoint | None:
        with self._lock:
            if self._key is None:
                return None
            seq, head = self.head()
            cp = make_checkpoint(self._key, self._lab_id, seq, head)
            self._checkpoints.append(cp)
            return cp

    # Test hooks: let the conformance suite tamper with stored data the way an attacker would.
    def _tamper_events(self, events: list[StoredEvent]) -> None:
        with self._lock:
            self._events = list(events)

    def _tamper_record(self, record: StoredRecord) -> None:
        with self._lock:
            self._records[record.id] = record
