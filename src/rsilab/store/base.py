"""The store's two ABCs: :class:`StoreReader` (the reads) and :class:`Store` (reads and
writes). Each class's docstring lists its contracts. ``tests/store/test_reader_conformance.py``
checks the reader contracts against every reader (the stores and
:class:`~rsilab.store.mirror.StoreMirror`); ``tests/store/test_conformance.py`` checks the
store contracts against every store.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Self, TypeVar

from rsilab.errors import NotFoundError
from rsilab.records import Campaign, Event, EventDraft, Record
from rsilab.store.fences import Fence, Fences
from rsilab.store.ledger import Checkpoint, StoredEvent, StoredRecord

R = TypeVar("R", bound=Record)

CHECKPOINT_INTERVAL = 64
"""A signed checkpoint is written with every event whose sequence is a multiple of this."""


class StoreReader(ABC):
    """Reads of a lab's records and ledger; nothing here writes.

    Contracts every reader keeps:

    - **Reads.** :meth:`get` and :meth:`get_as` raise :class:`~rsilab.errors.NotFoundError`
      for a missing record (and ``get_as`` for one of another type); queries return records
      oldest first by creation (an update keeps a record's place); :meth:`events` returns
      events in sequence order.
    - **The ledger as stored.** :meth:`stored_events` and :meth:`stored_records` give the
      canonical JSON text exactly as the store holds it, so :func:`~rsilab.store.verify_store`
      can check a lab through any reader.
    - **Shared results.** A reader may hand the same record object to several callers:
      callers must not change a record they read (a :class:`Store` returns copies).
    - **Position.** A reader answers as of some ledger position; one that keeps a copy (the
      :class:`~rsilab.store.mirror.StoreMirror`) may be behind its source until refreshed.
    - **Thread safety.** Every method may be called from several threads at once.
    """

    @property
    @abstractmethod
    def lab_id(self) -> str:
        """Stable id of the lab, used to find its key outside the lab folder."""

    @abstractmethod
    def get(self, record_id: str) -> Record:
        """The current revision of a record. Raises NotFoundError."""

    @abstractmethod
    def query(
        self,
        kind: str | None = None,
        *,
        campaign_id: str | None = None,
        fields: Mapping[str, Any] | None = None,
        text: str | None = None,
        limit: int | None = None,
    ) -> list[Record]:
        """Records matching every given filter, oldest first.

        ``fields`` matches top-level fields by equality; ``text`` is a case-insensitive
        substring of the record's JSON text.
        """

    @abstractmethod
    def events(
        self,
        *,
        after: int = 0,
        campaign_id: str | None = None,
        record_id: str | None = None,
        limit: int | None = None,
    ) -> list[Event]:
        """Events with ``seq > after``, in order, optionally only those of a campaign or record."""

    @abstractmethod
    def head(self) -> tuple[int, str]:
        """Sequence and hash of the last event (0 and the genesis hash when empty)."""

    @abstractmethod
    def stored_events(self, after: int = 0) -> Iterator[StoredEvent]:
        """Events exactly as stored (text and hash), for verification."""

    @abstractmethod
    def stored_records(self) -> Iterator[StoredRecord]:
        """Records exactly as stored, for verification."""

    @abstractmethod
    def checkpoints(self) -> list[Checkpoint]:
        """Signed checkpoints kept in the lab, oldest first."""

    # -- helpers derived from the primitives, written once ------------------------------------

    def get_as(self, record_id: str, cls: type[R]) -> R:
        """:meth:`get`, checked to be of type ``cls``; NotFoundError otherwise."""
        record = self.get(record_id)
        if not isinstance(record, cls):
            raise NotFoundError(cls.KIND, record_id)
        return record

    def query_as(self, cls: type[R], **filters: Any) -> list[R]:
        """:meth:`query` for one record type, typed."""
        return [r for r in self.query(cls.KIND, **filters) if isinstance(r, cls)]

    def resolve_campaign(self, ref: str) -> Campaign:
        """A campaign by id, or the most recently created one for ``'latest'``."""
        if ref == "latest":
            campaigns = self.query_as(Campaign)
            if not campaigns:
                raise NotFoundError("campaign", "latest")
            return max(campaigns, key=lambda c: c.created_at)
        return self.get_as(ref, Campaign)


class Store(StoreReader):
    """Persistent records plus the append-only ledger: the reads of :class:`StoreReader`
    and the writes.

    Contracts every store keeps, besides the reader's:

    - **Atomic commits.** :meth:`commit` writes its records and appends exactly one ledger
      event in one transaction: all of it lands, or none of it and the error is raised.
    - **Serialised, gap-free ledger.** Sequence numbers start at 1 and have no gaps; each
      event holds the hash of the one before. Concurrent commits (threads, and for SQLite
      processes on one machine) are serialised, so the chain never forks.
    - **Revisions.** A record passed to ``commit`` with ``rev == 0`` must be new; otherwise
      its ``rev`` must equal the stored revision (compare-and-swap). The store bumps ``rev``
      on write and returns the written copies through the event's refs. A mismatch raises
      :class:`~rsilab.errors.ConflictError` and nothing is written.
    - **Immutability.** Writing over a record that ``is_finished()``, or any write that
      :meth:`Record.check_update` refuses, raises :class:`~rsilab.errors.ConflictError`.
    - **Current reads, as copies.** Reads see every commit that returned before them, and
      each read returns a fresh copy the caller may change (and commit back).
    - **JSON only.** Records and events are stored as canonical JSON text, never pickle.
    - **Fences.** A commit covered by a :class:`~rsilab.store.fences.Fence` this store holds
      reads the fence's record inside its transaction and raises the fence's error instead
      of writing when the fence does not admit it (see :mod:`rsilab.store.fences`).

    Subclasses call ``super().__init__()``.
    """

    def __init__(self) -> None:
        self._fences = Fences()

    def fence(self, fence: Fence) -> None:
        """Check every later commit of ``fence.campaign_id`` through this store against
        ``fence`` (replacing the campaign's previous fence)."""
        self._fences.add(fence)

    def unfence(self, fence: Fence) -> None:
        """Stop checking ``fence`` (nothing when another fence replaced it)."""
        self._fences.remove(fence)

    @abstractmethod
    def commit(self, draft: EventDraft, writes: Sequence[Record] = ()) -> Event:
        """Write ``writes`` and append one event describing them, atomically.

        On success each record in ``writes`` has its ``rev`` updated in place to the stored
        revision. Raises ConflictError (revision mismatch, finished record), LabError
        (the database could not be written: full, read-only, corrupt, no longer the lab's
        file) or the error of a fence that refused it.
        """

    def checkpoint_now(self) -> Checkpoint | None:
        """Sign the current head now (for example before closing); None without a key."""
        return None

    def close(self) -> None:  # an optional hook: most backends need nothing
        """Release resources. The store must not be used afterwards."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
