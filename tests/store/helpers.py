"""Small builders shared by the store tests."""

from __future__ import annotations

from rsilab.records import EventDraft, Finding, FindingStatus
from rsilab.store.base import Store

MEMORY_KEY = bytes(range(32))
"""The key the suites' memory stores sign checkpoints with."""


def draft(detail: str = "", *, campaign_id: str | None = None, action: str = "test") -> EventDraft:
    """An event draft from a test actor."""
    return EventDraft(
        actor="tester", role="human", action=action, campaign_id=campaign_id, detail=detail
    )


def finding(claim: str = "a claim", *, campaign_id: str | None = None) -> Finding:
    """A new (rev 0) finding."""
    return Finding(claim=claim, status=FindingStatus.UNRESOLVED, campaign_id=campaign_id)


def fill(store: Store, events: int, *, with_records: bool = True) -> list[Finding]:
    """Commit ``events`` events with details ``event 1..n``.

    With records, each event writes a new finding, except every third, which updates the
    finding written just before it; returns the findings as last written.
    """
    written: list[Finding] = []
    start = store.head()[0]
    for i in range(start + 1, start + events + 1):
        if not with_records:
            store.commit(draft(f"event {i}"))
        elif written and i % 3 == 0:
            written[-1].claim += " (revised)"
            store.commit(draft(f"event {i}"), [written[-1]])
        else:
            record = finding(f"claim {i}")
            store.commit(draft(f"event {i}"), [record])
            written.append(record)
    return written
