"""Skills and orientations as revision chains: each revision a new lab-wide record.

A revision never edits the record before it: it is a new record with ``version`` one above the
latest of its name and ``parent_id`` pointing at that latest, written with one ledger event.
Two processes revising the same name at once may both write the same version number; the
later one counts as the latest (see :func:`latest_skill`), and both stay in the history.
"""

from __future__ import annotations

from typing import TypeVar

from rsilab.errors import UserError
from rsilab.records import EventDraft, Orientation, Role, Skill
from rsilab.store.base import Store, StoreReader

V = TypeVar("V", Skill, Orientation)


def _history(store: Store, cls: type[V], name: str) -> list[V]:
    return sorted(
        store.query_as(cls, fields={"name": name}), key=lambda r: (r.version, r.created_at)
    )


def _latest_by_name(store: StoreReader, cls: type[V]) -> list[V]:
    latest: dict[str, V] = {}
    for record in sorted(store.query_as(cls), key=lambda r: (r.version, r.created_at)):
        latest[record.name] = record
    return [latest[name] for name in sorted(latest)]


def skill_history(store: Store, name: str) -> list[Skill]:
    """Every revision of the skill ``name``, oldest (lowest version) first."""
    return _history(store, Skill, name)


def orientation_history(store: Store, name: str) -> list[Orientation]:
    """Every revision of the orientation ``name``, oldest (lowest version) first."""
    return _history(store, Orientation, name)


def latest_skill(store: Store, name: str) -> Skill | None:
    """The newest revision of skill ``name``: the highest version (ties: latest created)."""
    found = skill_history(store, name)
    return found[-1] if found else None


def latest_orientation(store: Store, name: str) -> Orientation | None:
    """The newest revision of orientation ``name``: the highest version (ties: latest created)."""
    found = orientation_history(store, name)
    return found[-1] if found else None


def latest_skills(store: StoreReader) -> list[Skill]:
    """The latest revision of every skill, by name."""
    return _latest_by_name(store, Skill)


def latest_orientations(store: StoreReader) -> list[Orientation]:
    """The latest revision of every orientation, by name."""
    return _latest_by_name(store, Orientation)


def _check(kind: str, name: str, text: str) -> None:
    if not name.strip():
        raise UserError(f"a {kind} needs a name", f"give the {kind} a short name")
    if not text.strip():
        raise UserError(f"{kind} {name!r}: the text is empty", f"write the {kind} as text")


def _commit(store: Store, record: V, *, actor: str, role: Role, reason: str) -> V:
    kind = record.KIND
    detail = f"{record.name} v{record.version}" + (f": {reason}" if reason else "")
    draft = EventDraft(actor=actor, role=str(role), action=f"{kind}_revised", detail=detail)
    store.commit(draft, [record])
    return record


def revise_skill(
    store: Store,
    name: str,
    text: str,
    code: str | None = None,
    *,
    actor: str,
    role: Role,
    reason: str = "",
) -> Skill:
    """Store a new revision of skill ``name`` (version 1 when it has none) and return it.

    Raises UserError when ``name`` or ``text`` is empty, or when text and code are those of
    the latest revision (a revision must change something).
    """
    _check("skill", name, text)
    latest = latest_skill(store, name)
    if latest is not None and (latest.text, latest.code) == (text, code):
        raise UserError(
            f"skill {name!r}: the revision is the same as v{latest.version}",
            "change the text or the code, or leave the skill as it is",
        )
    skill = Skill(
        name=name,
        version=1 if latest is None else latest.version + 1,
        text=text,
        code=code,
        parent_id=None if latest is None else latest.id,
    )
    return _commit(store, skill, actor=actor, role=role, reason=reason)


def revise_orientation(
    store: Store,
    name: str,
    text: str,
    *,
    actor: str,
    role: Role,
    reason: str = "",
    weight: float | None = None,
) -> Orientation:
    """Store a new revision of orientation ``name`` (version 1 when it has none); return it.

    ``weight`` (None: the latest's, or 1.0) is its share of a team at the start, against
    the other orientations.

    Raises UserError when ``name`` or ``text`` is empty, when ``weight`` is not positive, or
    when text and weight are the latest's (a revision must change something).
    """
    _check("orientation", name, text)
    latest = latest_orientation(store, name)
    if weight is None:
        weight = 1.0 if latest is None else latest.weight
    if not weight > 0:
        raise UserError(
            f"orientation {name!r}: weight {weight} is not positive", "give a weight above 0"
        )
    if latest is not None and (latest.text, latest.weight) == (text, weight):
        raise UserError(
            f"orientation {name!r}: the revision is the same as v{latest.version}",
            "change the text or the weight, or leave the orientation as it is",
        )
    orientation = Orientation(
        name=name,
        version=1 if latest is None else latest.version + 1,
        text=text,
        parent_id=None if latest is None else latest.id,
        weight=weight,
    )
    return _commit(store, orientation, actor=actor, role=role, reason=reason)
