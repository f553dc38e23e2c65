"""Fences: writes for a campaign that a store refuses once a record no longer admits them.

A process that runs a campaign holds its lease; a process paused past the lease's ttl may
wake after another took the campaign over and, until it notices, record results, heartbeats
and endings for a campaign it no longer runs. A heartbeat cannot close that window (the
paused process has not looked yet); only the store can, at the moment of each write. So a
:class:`Fence` names a campaign and the record that decides (its lease), and
:meth:`~rsilab.store.Store.commit` reads that record inside the same transaction as the
write, under the same lock a takeover's write needs, and refuses the commit when the fence's
``admits`` says no. One read per fenced commit; nothing else pays.

Which commits a fence covers: those whose event names its campaign, or that write any record
of that campaign. Writes of no campaign (a lineage's baseline) and of other campaigns pass. A
commit that writes the deciding record itself (the lease's own heartbeat, release, takeover)
passes too: its compare-and-swap on that record already fences it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rsilab.errors import RsilabError
from rsilab.records import EventDraft, Record


@dataclass(frozen=True, eq=False)
class Fence:
    """What a campaign's writes through one store must meet (compared by identity)."""

    campaign_id: str
    """The campaign whose writes are fenced."""
    record_id: str
    """The record that decides, read inside each fenced commit (a campaign's lease)."""
    admits: Callable[[Record | None], RsilabError | None]
    """Given that record as stored (None when missing): None to let the write go on, or the
    error the commit raises instead (nothing is written). Called inside the store's
    transaction, from any writing thread: it must not use the store."""


class Fences:
    """The fences one store holds, at most one per campaign; safe for several threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_campaign: dict[str, Fence] = {}

    def add(self, fence: Fence) -> None:
        """Hold ``fence``, replacing the campaign's previous one."""
        with self._lock:
            self._by_campaign[fence.campaign_id] = fence

    def remove(self, fence: Fence) -> None:
        """Stop holding ``fence``; nothing when it was replaced or removed already."""
        with self._lock:
            if self._by_campaign.get(fence.campaign_id) is fence:
                del self._by_campaign[fence.campaign_id]

    def check(
        self,
        draft: EventDraft,
        writes: Sequence[Record],
        load: Callable[[str], Record | None],
    ) -> None:
        """Raise the error of the first fence covering this commit that does not admit it.

        Call inside the commit's transaction, before anything is written, with the lookup
        the transaction reads records with.
        """
        with self._lock:
            if not self._by_campaign:
                return
            fences = dict(self._by_campaign)
        touched = {draft.campaign_id, *(r.campaign_id for r in writes)}
        ids = {r.id for r in writes}
        for campaign_id in sorted(c for c in touched if c is not None):
            fence = fences.get(campaign_id)
            if fence is None or fence.record_id in ids:
                continue
            refused = fence.admits(load(fence.record_id))
            if refused is not None:
                raise refused
