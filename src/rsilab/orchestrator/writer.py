"""The orchestrator's one way to write records outside the tools.

Agents act only through the Experiment OS, whose dispatcher writes one ledger event per tool
call. What the orchestrator itself records (a campaign's lease, intents, recovery, budget and
ending; an evolution; guidance; a team's campaign review) goes through :func:`write`, so every
such write is findable in one place and has the same shape: its records and one event, in one
transaction.
"""

from __future__ import annotations

from collections.abc import Sequence

from rsilab.records import Event, EventDraft, Record, Role
from rsilab.store import Store

ACTOR = "orchestrator"
"""The ledger actor of what the orchestrator itself records (campaign, intents, recovery)."""


def write(
    store: Store,
    action: str,
    records: Sequence[Record] = (),
    *,
    campaign_id: str | None = None,
    detail: str = "",
    actor: str = ACTOR,
    role: Role | str = Role.CONTROLLER,
) -> Event:
    """Commit ``records`` with one ledger event ``action`` by ``actor`` in ``role``.

    Raises what :meth:`~rsilab.store.Store.commit` raises: ConflictError when a record
    changed since it was read (nothing is written), LabError when the lab cannot be written.
    """
    draft = EventDraft(
        actor=actor, role=str(role), action=action, campaign_id=campaign_id, detail=detail
    )
    return store.commit(draft, list(records))
