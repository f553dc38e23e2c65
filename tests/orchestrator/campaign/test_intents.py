"""Intents: written before a side effect, completed with it, never repeated once done."""

from __future__ import annotations

import pytest

from rsilab.errors import ConflictError
from rsilab.expos import open_campaign
from rsilab.orchestrator.campaign._intents import (
    DoneIntent,
    abandon,
    begin,
    complete,
    pending_intents,
)
from rsilab.records import (
    Direction,
    EventDraft,
    Experiment,
    Intent,
    IntentState,
    TaskRef,
    intent_id,
)
from rsilab.store import Lab, Store, verify_store


def _setup(store: Store) -> tuple[str, str]:
    campaign_id = open_campaign(store, TaskRef(name="digits")).id
    direction = Direction(campaign_id=campaign_id, title="d", hypothesis="h")
    store.commit(EventDraft(actor="t", role="main", action="test"), [direction])
    return campaign_id, direction.id


def _experiment(campaign_id: str, direction_id: str, key: str) -> Experiment:
    return Experiment(campaign_id=campaign_id, direction_id=direction_id, description=key)


def test_begin_then_complete_happens_once(lab: Lab) -> None:
    campaign_id, direction_id = _setup(lab.store)
    step = begin(lab.store, campaign_id, "exp:1", "create_experiment", {"n": 1})
    assert isinstance(step, Intent)
    assert (step.id, step.state, step.attempts) == (
        intent_id(campaign_id, "exp:1"),
        IntentState.PENDING,
        1,
    )
    assert pending_intents(lab.store, campaign_id) == [step]
    exp = _experiment(campaign_id, direction_id, "exp:1")
    done = complete(lab.store, step, {"experiment_id": exp.id}, writes=[exp])
    assert done.state is IntentState.DONE and done.finished_at is not None
    # The effect and the completion are one event: a crash cannot split them.
    last = lab.store.events()[-1]
    assert last.action == "intent_done"
    assert {r.id for r in last.records} == {step.id, exp.id}

    head = lab.store.head()
    again = begin(lab.store, campaign_id, "exp:1", "create_experiment", {"n": 1})
    assert isinstance(again, DoneIntent)
    assert again.result == {"experiment_id": exp.id}
    assert lab.store.head() == head  # nothing written, nothing repeated
    assert pending_intents(lab.store, campaign_id) == []
    assert verify_store(lab.store, None).ok


def test_a_key_has_one_intent_and_a_crash_makes_a_new_attempt(lab: Lab) -> None:
    campaign_id, direction_id = _setup(lab.store)
    first = begin(lab.store, campaign_id, "exp:7", "create_experiment")
    # The runner dies here, before completing; the next one begins the same key.
    second = begin(lab.store, campaign_id, "exp:7", "create_experiment")
    assert isinstance(second, Intent)
    assert (second.id, second.attempts, second.state) == (first.id, 2, IntentState.PENDING)
    assert len(lab.store.query_as(Intent, campaign_id=campaign_id)) == 1
    exp = _experiment(campaign_id, direction_id, "exp:7")
    complete(lab.store, second, {"experiment_id": exp.id}, writes=[exp])
    actions = [e.action for e in lab.store.events(record_id=first.id)]
    assert actions == ["intent_begun", "intent_retried", "intent_done"]


def test_a_stale_runner_cannot_complete_an_intent_begun_again(lab: Lab) -> None:
    campaign_id, direction_id = _setup(lab.store)
    stale = begin(lab.store, campaign_id, "exp:1", "create_experiment")
    assert isinstance(stale, Intent)
    begin(lab.store, campaign_id, "exp:1", "create_experiment")  # a new holder took over
    exp = _experiment(campaign_id, direction_id, "exp:1")
    with pytest.raises(ConflictError):
        complete(lab.store, stale, {"experiment_id": exp.id}, writes=[exp])
    assert lab.store.query_as(Experiment, campaign_id=campaign_id) == []


def test_one_key_names_one_side_effect(lab: Lab) -> None:
    campaign_id, _ = _setup(lab.store)
    begin(lab.store, campaign_id, "k", "create_experiment", {"n": 1})
    with pytest.raises(ConflictError, match="one key names one side effect"):
        begin(lab.store, campaign_id, "k", "create_experiment", {"n": 2})
    with pytest.raises(ConflictError):
        begin(lab.store, campaign_id, "k", "run_job", {"n": 1})


def test_keys_are_per_campaign(lab: Lab) -> None:
    first, _ = _setup(lab.store)
    second, _ = _setup(lab.store)
    a = begin(lab.store, first, "k", "x")
    b = begin(lab.store, second, "k", "x")
    assert isinstance(a, Intent) and isinstance(b, Intent)
    assert a.id != b.id and b.attempts == 1


def test_an_abandoned_intent_is_not_pending_and_not_begun_again(lab: Lab) -> None:
    campaign_id, _ = _setup(lab.store)
    step = begin(lab.store, campaign_id, "k", "x")
    assert isinstance(step, Intent)
    gone = abandon(lab.store, step, "the direction was refuted")
    assert gone.state is IntentState.ABANDONED
    assert pending_intents(lab.store, campaign_id) == []
    with pytest.raises(ConflictError, match="abandoned"):
        begin(lab.store, campaign_id, "k", "x")
    with pytest.raises(ConflictError):  # final: it cannot be completed afterwards
        complete(lab.store, gone, {})
