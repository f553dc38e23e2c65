"""Bearer tokens for MCP over HTTP: issued, checked, expired, revoked, and their ledger."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime, timedelta

import pytest

from rsilab.errors import ConflictError, UserError
from rsilab.expos import open_campaign
from rsilab.mcp import tokens
from rsilab.records import AgentToken, Campaign, EventDraft, Outcome, ProtocolFlag, Role, TaskRef
from rsilab.store import Lab

WEEK = timedelta(days=7)


def test_a_token_is_256_random_bits_and_the_lab_keeps_only_its_sha256(
    lab: Lab, campaign: Campaign
) -> None:
    record, text = tokens.issue(lab.store, campaign.id, Role.WORKER, "w1", WEEK)
    assert re.fullmatch(r"rsl_[A-Za-z0-9_-]{43}", text)  # 43 base64url characters: 256 bits
    stored = lab.store.get_as(record.id, AgentToken)
    assert stored.token_sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert text[4:] not in stored.model_dump_json()
    assert (stored.campaign_id, stored.role, stored.actor) == (campaign.id, Role.WORKER, "w1")
    event = lab.store.events(after=0)[-1]
    assert (event.action, event.outcome, event.campaign_id) == (
        "token_issued",
        Outcome.OK,
        campaign.id,
    )
    assert [r.id for r in event.records] == [record.id]
    _, second = tokens.issue(lab.store, campaign.id, Role.WORKER, "w1", WEEK)
    assert second != text


def test_check_grants_the_role_and_actor_of_the_token(lab: Lab, campaign: Campaign) -> None:
    record, text = tokens.issue(lab.store, campaign.id, Role.REVIEWER, "rev-2", WEEK)
    found = tokens.check(lab.store, text, campaign.id)
    assert isinstance(found, tokens.Grant)
    assert (found.token_id, found.role, found.actor, found.campaign_id) == (
        record.id,
        Role.REVIEWER,
        "rev-2",
        campaign.id,
    )


@pytest.mark.parametrize(
    "presented",
    [None, "", "rsl_short", "Bearer x", "rsl_" + "A" * 43, "xyz_" + "A" * 43],
)
def test_check_refuses_a_missing_or_unknown_token(
    lab: Lab, campaign: Campaign, presented: str | None
) -> None:
    tokens.issue(lab.store, campaign.id, Role.WORKER, "w1", WEEK)
    found = tokens.check(lab.store, presented, campaign.id)
    assert isinstance(found, tokens.Refused) and found.token is None
    expected = "missing_token" if not presented else "unknown_token"
    assert found.reason == expected


def test_a_token_expires_at_its_time(lab: Lab, campaign: Campaign) -> None:
    start = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    record, text = tokens.issue(
        lab.store, campaign.id, Role.WORKER, "w1", timedelta(hours=2), now=start
    )
    assert record.expires_at == "2026-01-01T14:00:00Z"
    just_before = datetime(2026, 1, 1, 13, 59, 59, tzinfo=UTC)
    assert isinstance(tokens.check(lab.store, text, campaign.id, now=just_before), tokens.Grant)
    at = datetime(2026, 1, 1, 14, 0, tzinfo=UTC)
    refused = tokens.check(lab.store, text, campaign.id, now=at)
    assert isinstance(refused, tokens.Refused)
    assert (refused.reason, refused.token and refused.token.id) == ("expired_token", record.id)
    assert tokens.state(record, at) == "expired"


def test_a_revoked_token_is_refused_and_cannot_change_again(lab: Lab, campaign: Campaign) -> None:
    record, text = tokens.issue(lab.store, campaign.id, Role.WORKER, "w1", WEEK)
    tokens.revoke(lab.store, record.id, by="alice")
    refused = tokens.check(lab.store, text, campaign.id)
    assert isinstance(refused, tokens.Refused) and refused.reason == "revoked_token"
    event = lab.store.events(after=0)[-1]
    assert (event.action, event.actor, [r.id for r in event.records]) == (
        "token_revoked",
        "alice",
        [record.id],
    )
    with pytest.raises(UserError, match="already revoked"):
        tokens.revoke(lab.store, record.id)
    stored = lab.store.get_as(record.id, AgentToken)
    assert tokens.state(stored) == "revoked"
    stored.revoked_at = None  # un-revoking is an update of a finished record
    with pytest.raises(ConflictError):
        lab.store.commit(_draft(), [stored])


def test_a_token_names_one_campaign(lab: Lab, campaign: Campaign) -> None:
    _, text = tokens.issue(lab.store, campaign.id, Role.WORKER, "w1", WEEK)
    refused = tokens.check(lab.store, text, "cmp-000000000000")
    assert isinstance(refused, tokens.Refused)
    assert refused.reason == "token_for_another_campaign"


def test_who_a_token_is_for_never_changes(lab: Lab, campaign: Campaign) -> None:
    record, _ = tokens.issue(lab.store, campaign.id, Role.WORKER, "w1", WEEK)
    for field, value in [
        ("role", Role.MAIN),
        ("actor", "w2"),
        ("expires_at", "2999-01-01T00:00:00Z"),
    ]:
        stored = lab.store.get_as(record.id, AgentToken)
        setattr(stored, field, value)
        with pytest.raises(ConflictError, match=field):
            lab.store.commit(_draft(), [stored])


def test_revoking_an_unknown_token_is_a_user_error(lab: Lab) -> None:
    with pytest.raises(UserError, match="no token 'tok-000000000000'") as caught:
        tokens.revoke(lab.store, "tok-000000000000")
    assert "rsilab token list" in caught.value.hint


@pytest.mark.parametrize("role", [Role.HUMAN, Role.CONTROLLER])
def test_tokens_are_for_agent_roles_only(lab: Lab, campaign: Campaign, role: Role) -> None:
    with pytest.raises(UserError, match="agent role"):
        tokens.issue(lab.store, campaign.id, role, "w1", WEEK)


@pytest.mark.parametrize("actor", ["", "../w", "a b", "w/1", ".hidden", "x" * 101])
def test_an_actor_is_a_plain_name(lab: Lab, campaign: Campaign, actor: str) -> None:
    with pytest.raises(UserError, match="plain name"):
        tokens.issue(lab.store, campaign.id, Role.WORKER, actor, WEEK)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30m", 1800), ("12h", 43200), ("7d", 604800), ("2w", 1209600), ("90s", 90)],
)
def test_lifetimes(text: str, seconds: int) -> None:
    assert tokens.parse_lifetime(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["7", "0d", "367d", "-1d", "7 days", "1y", ""])
def test_bad_lifetimes_are_user_errors(text: str) -> None:
    with pytest.raises(UserError, match="--expires") as caught:
        tokens.parse_lifetime(text)
    assert caught.value.hint


def test_a_refusal_is_a_denied_event_with_an_access_flag(lab: Lab, campaign: Campaign) -> None:
    record, _ = tokens.issue(lab.store, campaign.id, Role.WORKER, "w1", WEEK)
    refused = tokens.Refused(tokens.Refusal.EXPIRED, record)
    tokens.record_refusal(lab.store, campaign.id, refused, "POST from 10.0.0.2")
    event = lab.store.events(after=0)[-1]
    flag = lab.store.get_as(event.records[0].id, ProtocolFlag)
    assert (event.action, event.outcome, event.actor, event.role) == (
        "http_auth_refused",
        Outcome.DENIED,
        "w1",
        "worker",
    )
    assert (flag.stage, flag.rule, flag.blocked) == ("access", "expired_token", True)
    assert record.id in flag.detail and "10.0.0.2" in flag.detail
    anonymous = tokens.Refused(tokens.Refusal.UNKNOWN)
    tokens.record_refusal(lab.store, campaign.id, anonymous, "POST from 10.0.0.3")
    assert lab.store.events(after=0)[-1].actor == "unauthenticated"


def test_listed_filters_by_campaign(lab: Lab, campaign: Campaign) -> None:
    other = open_campaign(lab.store, TaskRef(name="digits"))
    first, _ = tokens.issue(lab.store, campaign.id, Role.WORKER, "w1", WEEK)
    second, _ = tokens.issue(lab.store, other.id, Role.MAIN, "m1", WEEK)
    assert [t.id for t in tokens.listed(lab.store)] == [first.id, second.id]
    assert [t.id for t in tokens.listed(lab.store, other.id)] == [second.id]


def _draft() -> EventDraft:
    return EventDraft(actor="test", role="human", action="tamper")
