"""Role texts as versioned Orientation records: seeded once, revised by later work."""

from __future__ import annotations

from rsilab.agents.roles._base import RoleDefinition
from rsilab.agents.roles.leader import LEADER
from rsilab.agents.roles.main import MAIN
from rsilab.agents.roles.reviewer import REVIEWER
from rsilab.agents.roles.worker import WORKER
from rsilab.memory.revisions import latest_orientation
from rsilab.records import EventDraft, Orientation, Role
from rsilab.store.base import Store

ROLES: dict[Role, RoleDefinition] = {d.role: d for d in (MAIN, WORKER, REVIEWER, LEADER)}
"""The role definitions, by role."""


def ensure_role_orientations(
    store: Store, *, actor: str = "orchestrator", role: Role = Role.CONTROLLER
) -> dict[str, Orientation]:
    """The latest Orientation of each role in :data:`ROLES`, keyed by name (``role:main``...).

    A role with no Orientation yet gets its built-in text stored as version 1 (lab-wide, no
    parent), all in one ledger event (action ``orientations_seeded``, by ``actor`` in
    ``role``). Roles that have one are left alone, so the call is idempotent and a revision (a
    newer record pointing at its parent) is what it returns from then on. Agents are to be
    driven by the returned texts, not by the built-in constants.

    Two processes seeding the same empty lab at once may both write a version 1; the later
    one is then returned, which is harmless (the texts are the same).
    """
    texts = {d.orientation_name: d.text for d in ROLES.values()}
    return seed_orientations(store, texts, actor=actor, role=role)


def seed_orientations(
    store: Store, texts: dict[str, str], *, actor: str, role: Role
) -> dict[str, Orientation]:
    """The latest Orientation of each name in ``texts``; a name with none yet gets its text
    stored as version 1, all in one ``orientations_seeded`` event (see
    :func:`ensure_role_orientations`)."""
    latest: dict[str, Orientation] = {}
    seeds: list[Orientation] = []
    for name, text in texts.items():
        current = latest_orientation(store, name)
        if current is None:
            current = Orientation(name=name, version=1, text=text)
            seeds.append(current)
        latest[name] = current
    if seeds:
        names = ", ".join(o.name for o in seeds)
        draft = EventDraft(actor=actor, role=str(role), action="orientations_seeded", detail=names)
        store.commit(draft, seeds)
    return latest
