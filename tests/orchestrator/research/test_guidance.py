"""Guidance: given by a person, read once by a planning step, both in the ledger."""

from __future__ import annotations

import pytest

from rsilab.errors import ConflictError, UserError
from rsilab.expos import open_campaign
from rsilab.orchestrator.research.guidance import give_guidance, mark_guidance_read, unread_guidance
from rsilab.records import Campaign, CampaignState, EventDraft, Guidance, TaskRef
from rsilab.store import Lab, verify_store
from tests.orchestrator.runner_checks import force_campaign_state


@pytest.fixture
def campaign(lab: Lab) -> Campaign:
    return open_campaign(lab.store, TaskRef(name="synthetic"))


def actions(lab: Lab, campaign: Campaign) -> list[str]:
    return [e.action for e in lab.store.events(campaign_id=campaign.id)]


def test_guidance_is_unread_until_a_planning_step_reads_it(lab: Lab, campaign: Campaign) -> None:
    first = give_guidance(lab.store, campaign.id, "  Try adam.  ", "ada")
    second = give_guidance(lab.store, campaign.id, "Then lower lr.", "ada")
    assert first.text == "Try adam." and first.given_by == "ada" and first.read_at is None
    assert [g.id for g in unread_guidance(lab.store, campaign.id)] == [first.id, second.id]

    read = mark_guidance_read(lab.store, first, "main")
    assert read.read_at is not None and read.read_by == "main"
    assert [g.id for g in unread_guidance(lab.store, campaign.id)] == [second.id]
    assert mark_guidance_read(lab.store, first, "main") == read  # a read is recorded once
    assert actions(lab, campaign).count("guidance_given") == 2
    assert actions(lab, campaign).count("guidance_read") == 1
    assert verify_store(lab.store, None).problems == []


def test_read_guidance_is_final(lab: Lab, campaign: Campaign) -> None:
    given = give_guidance(lab.store, campaign.id, "Try adam.", "ada")
    read = mark_guidance_read(lab.store, given, "main")
    stored = lab.store.get_as(read.id, Guidance)
    with pytest.raises(ConflictError):
        lab.store.commit(_draft(campaign), [stored.model_copy(update={"read_by": "someone else"})])
    unread = lab.store.get_as(give_guidance(lab.store, campaign.id, "More.", "ada").id, Guidance)
    with pytest.raises(ConflictError, match="text"):
        lab.store.commit(_draft(campaign), [unread.model_copy(update={"text": "Less."})])


def test_bad_guidance_is_refused_with_a_hint(lab: Lab, campaign: Campaign) -> None:
    with pytest.raises(UserError, match="empty") as empty:
        give_guidance(lab.store, campaign.id, "   ", "ada")
    assert empty.value.hint
    with pytest.raises(UserError, match="no campaign"):
        give_guidance(lab.store, "cmp-000000000000", "Try adam.", "ada")
    with pytest.raises(UserError, match="characters long"):
        give_guidance(lab.store, campaign.id, "x" * 5000, "ada")
    force_campaign_state(lab, campaign.id, CampaignState.FINISHED)
    with pytest.raises(UserError, match="finished") as finished:
        give_guidance(lab.store, campaign.id, "Try adam.", "ada")
    assert "new campaign" in (finished.value.hint or "")
    assert unread_guidance(lab.store, campaign.id) == []


def _draft(campaign: Campaign) -> EventDraft:
    return EventDraft(actor="t", role="human", action="edit", campaign_id=campaign.id)
