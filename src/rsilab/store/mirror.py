"""A read-only copy in memory of some kinds of a lab's records, kept current from the ledger.

Every write appends an event that names the records it wrote (``Event.records``), so a copy
made at ledger sequence ``n`` is brought up to date by reading the events after ``n`` and
fetching the records they name at their new revision: nothing else can have changed.
:class:`StoreMirror` does that in :meth:`StoreMirror.refresh`, answers reads of the kinds it
copies from memory, with the results and order the source gives (oldest first), and passes
every other read to the source. It can keep the ledger's events too, taking in new ones on
each refresh.

It exists for readers that ask many questions of a large lab again and again (the dashboard):
a query over 10,000 experiments becomes a scan of objects in memory instead of parsing each
record's JSON again. Records it returns are shared between calls: callers must not change
them. It is a :class:`~rsilab.store.base.StoreReader`, not a store: it has no way to write.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from enum import Enum
from typing import Any

from pydantic import BaseModel

from rsilab.records import Event, Record
from rsilab.store.base import StoreReader
from rsilab.store.ledger import Checkpoint, StoredEvent, StoredRecord, record_text


class StoreMirror(StoreReader):
    """Records of ``kinds`` of ``source`` in memory, as of the last :meth:`refresh`; with
    ``events``, the ledger's events too (else they are read from the source each time, as
    are records of other kinds).

    Thread safe: reads and refreshes may run in several threads at once; a read sees the
    copy either before or after a refresh, never half of one.
    """

    def __init__(self, source: StoreReader, kinds: Iterable[str], *, events: bool = False) -> None:
        self._source = source
        self.kinds = frozenset(kinds)
        self._lock = threading.RLock()
        self._events: list[Event] | None = None
        self._of_record: dict[str, list[int]] = {}
        self._of_campaign: dict[str, list[int]] = {}
        if events:
            self._events = []
            self._keep(source.events())
            self._seq = self._events[-1].seq if self._events else 0
        else:
            self._seq = source.head()[0]
        # Records are read after the position is taken: one written meanwhile is newer than
        # the copy's position, and the refresh that reads its event finds it current.
        self._by_kind: dict[str, dict[str, Record]] = {
            kind: {r.id: r for r in source.query(kind)} for kind in sorted(self.kinds)
        }
        self._records = {rid: r for by_id in self._by_kind.values() for rid, r in by_id.items()}

    @property
    def lab_id(self) -> str:
        return self._source.lab_id

    @property
    def seq(self) -> int:
        """The ledger sequence the copy is current to."""
        with self._lock:
            return self._seq

    def refresh(self) -> int:
        """Read what the source recorded since the last refresh; the number of new events."""
        with self._lock:
            events = self._source.events(after=self._seq)
            latest: dict[str, int] = {}
            for ev in events:
                for ref in ev.records:
                    if ref.kind in self.kinds:
                        latest[ref.id] = max(ref.rev, latest.get(ref.id, 0))
            for rid, rev in latest.items():
                known = self._records.get(rid)
                if known is None or known.rev < rev:
                    record = self._source.get(rid)
                    self._records[rid] = record  # an update keeps the record's place
                    self._by_kind[record.KIND][rid] = record
            if events:
                self._keep(events)
                self._seq = events[-1].seq
            return len(events)

    def _keep(self, events: Sequence[Event]) -> None:
        """Append ``events`` to the kept ledger and its indexes (when events are kept)."""
        if self._events is None:
            return
        for ev in events:
            index = len(self._events)
            self._events.append(ev)
            for ref in ev.records:
                self._of_record.setdefault(ref.id, []).append(index)
            if ev.campaign_id is not None:
                self._of_campaign.setdefault(ev.campaign_id, []).append(index)

    # -- reads --------------------------------------------------------------------------------

    def get(self, record_id: str) -> Record:
        with self._lock:
            found = self._records.get(record_id)
        return found if found is not None else self._source.get(record_id)

    def query(
        self,
        kind: str | None = None,
        *,
        campaign_id: str | None = None,
        fields: Mapping[str, Any] | None = None,
        text: str | None = None,
        limit: int | None = None,
    ) -> list[Record]:
        if kind not in self.kinds:
            return self._source.query(
                kind, campaign_id=campaign_id, fields=fields, text=text, limit=limit
            )
        assert kind is not None
        with self._lock:
            pool = list(self._by_kind[kind].values())
        out: list[Record] = []
        needle = text.lower() if text else None
        for record in pool:
            if limit is not None and len(out) >= limit:
                break
            if campaign_id is not None and record.campaign_id != campaign_id:
                continue
            if fields and not all(
                _json_value(getattr(record, name, None)) == wanted
                for name, wanted in fields.items()
            ):
                continue
            if needle is not None and needle not in record_text(record).lower():
                continue
            out.append(record)
        return out

    def events(
        self,
        *,
        after: int = 0,
        campaign_id: str | None = None,
        record_id: str | None = None,
        limit: int | None = None,
    ) -> list[Event]:
        with self._lock:
            kept = self._events
            if kept is None:
                picked = None
            elif record_id is not None:
                picked = [kept[i] for i in self._of_record.get(record_id, [])]
                if campaign_id is not None:
                    picked = [e for e in picked if e.campaign_id == campaign_id]
            elif campaign_id is not None:
                picked = [kept[i] for i in self._of_campaign.get(campaign_id, [])]
            else:
                picked = kept[after:]  # sequence n is at index n - 1: the ledger has no gaps
        if picked is None:
            return self._source.events(
                after=after, campaign_id=campaign_id, record_id=record_id, limit=limit
            )
        out = [e for e in picked if e.seq > after]
        return out[:limit] if limit is not None else out

    def head(self) -> tuple[int, str]:
        """The source's head (the copy may be behind it until the next refresh)."""
        return self._source.head()

    def stored_events(self, after: int = 0) -> Iterator[StoredEvent]:
        return self._source.stored_events(after)

    def stored_records(self) -> Iterator[StoredRecord]:
        return self._source.stored_records()

    def checkpoints(self) -> list[Checkpoint]:
        return self._source.checkpoints()


def _json_value(value: Any) -> Any:
    """A field's value as the record's JSON holds it (what ``fields`` filters compare)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    return value
