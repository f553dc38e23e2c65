"""Skills and orientations: each revision a new record pointing at its parent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rsilab.agents.roles import ensure_role_orientations
from rsilab.errors import UserError
from rsilab.memory import (
    latest_orientation,
    latest_orientations,
    latest_skill,
    latest_skills,
    orientation_history,
    revise_orientation,
    revise_skill,
    skill_history,
)
from rsilab.records import Role
from rsilab.store import Lab, Store, verify_store

WHO = {"actor": "campaign-review", "role": Role.CONTROLLER}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    lab = Lab.init(tmp_path / "lab")
    yield lab.store
    lab.close()


def test_a_skill_is_revised_as_a_chain(store: Store) -> None:
    first = revise_skill(store, "sweep-lr", "Try 3 rates.", None, reason="seed", **WHO)
    second = revise_skill(store, "sweep-lr", "Try 3 rates.", "rates = [1e-3]", **WHO)
    third = revise_skill(store, "sweep-lr", "Try 5 rates.", "rates = [1e-3]", reason="more", **WHO)
    assert [(s.version, s.parent_id) for s in (first, second, third)] == [
        (1, None),
        (2, first.id),
        (3, second.id),
    ]
    assert all(s.campaign_id is None for s in (first, second, third))
    assert [s.id for s in skill_history(store, "sweep-lr")] == [first.id, second.id, third.id]
    latest = latest_skill(store, "sweep-lr")
    assert latest is not None and latest.id == third.id
    [event] = store.events(record_id=third.id)
    assert (event.action, event.actor, event.role) == (
        "skill_revised",
        "campaign-review",
        "controller",
    )
    assert event.detail == "sweep-lr v3: more"
    assert verify_store(store).ok


def test_latest_skills_by_name(store: Store) -> None:
    revise_skill(store, "b", "one", **WHO)
    revise_skill(store, "a", "one", **WHO)
    newest_b = revise_skill(store, "b", "two", **WHO)
    assert [(s.name, s.version) for s in latest_skills(store)] == [("a", 1), ("b", 2)]
    assert latest_skills(store)[1].id == newest_b.id
    assert latest_skill(store, "missing") is None
    assert skill_history(store, "missing") == []


def test_empty_or_unchanged_revisions_are_refused(store: Store) -> None:
    revise_skill(store, "s", "text", "code", **WHO)
    head = store.head()
    with pytest.raises(UserError, match="same as v1"):
        revise_skill(store, "s", "text", "code", **WHO)
    with pytest.raises(UserError, match="text is empty"):
        revise_skill(store, "s", "  \n", None, **WHO)
    with pytest.raises(UserError, match="needs a name"):
        revise_skill(store, " ", "text", None, **WHO)
    revise_orientation(store, "explorer", "Explore.", **WHO)
    head = store.head()
    with pytest.raises(UserError, match="same as v1"):
        revise_orientation(store, "explorer", "Explore.", **WHO)
    with pytest.raises(UserError, match="text is empty"):
        revise_orientation(store, "explorer", "", **WHO)
    with pytest.raises(UserError, match="not positive"):
        revise_orientation(store, "explorer", "Explore.", weight=0.0, **WHO)
    assert store.head() == head  # nothing was written


def test_a_weight_revision_keeps_the_text_and_later_revisions_keep_the_weight(
    store: Store,
) -> None:
    first = revise_orientation(store, "explorer", "Explore.", **WHO)
    heavier = revise_orientation(store, "explorer", "Explore.", weight=2.5, **WHO)
    assert (first.weight, heavier.weight, heavier.parent_id) == (1.0, 2.5, first.id)
    reworded = revise_orientation(store, "explorer", "Explore wide.", **WHO)
    assert (reworded.version, reworded.weight) == (3, 2.5)


def test_orientations_are_revised_and_the_roles_run_on_the_revision(store: Store) -> None:
    seeded = ensure_role_orientations(store)["role:main"]
    revised = revise_orientation(store, "role:main", "Be terse.", reason="review", **WHO)
    assert (revised.version, revised.parent_id) == (2, seeded.id)
    assert ensure_role_orientations(store)["role:main"].id == revised.id
    assert [o.version for o in orientation_history(store, "role:main")] == [1, 2]
    found = latest_orientation(store, "role:main")
    assert found is not None and found.text == "Be terse."
    assert [(o.name, o.version) for o in latest_orientations(store)] == [
        ("role:leader", 1),
        ("role:main", 2),
        ("role:reviewer", 1),
        ("role:worker", 1),
    ]
    [event] = store.events(record_id=revised.id)
    assert event.action == "orientation_revised"
