"""Bearer tokens for the Experiment OS over MCP/HTTP: issue, list, revoke and check them, and
record a refused request.

A token is ``rsl_`` and 43 URL-safe characters (256 random bits). The lab keeps only its
sha256, in an :class:`~rsilab.records.AgentToken` record, so a copy of the lab does not give
away a usable token; the text is shown once, when issued. A token names its campaign, role
and actor: a server for that campaign takes all three from the token and from nothing the
request says. Issuing, revoking and every refused request are ledger events, so who could act
when, and who tried, is audited with the rest of the lab. Looking a token up by its digest
leaks nothing useful through timing: the digest of an unknown 256-bit secret cannot be
steered towards a stored one.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from rsilab.errors import NotFoundError, UserError
from rsilab.records import (
    AgentToken,
    EventDraft,
    FlagStage,
    Outcome,
    ProtocolFlag,
    Record,
    Role,
)
from rsilab.store.base import Store, StoreReader

TOKEN_PREFIX = "rsl_"
"""Every token's text starts with this, so a leaked one is recognisable (secret scanners)."""

TOKEN_BYTES = 32
"""Random bytes in a token: 256 bits."""

_TOKEN_TEXT = re.compile(r"rsl_[A-Za-z0-9_-]{43}")
_ACTOR = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,99}")
_DURATION = re.compile(r"(\d{1,6})([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}

MAX_LIFETIME = timedelta(days=366)
"""The longest a token may live: long-lived secrets are the ones that leak."""

ISSUED = "token_issued"
REVOKED = "token_revoked"
REFUSED = "http_auth_refused"
"""Ledger actions: a token issued, a token revoked, a request refused for its token."""


class Refusal(StrEnum):
    """Why a request's token was not accepted (the rule of its protocol flag)."""

    MISSING = "missing_token"
    UNKNOWN = "unknown_token"
    EXPIRED = "expired_token"
    REVOKED = "revoked_token"
    OTHER_CAMPAIGN = "token_for_another_campaign"
    COUNTED = "refusals_counted"
    """Not one request's reason: the refusals counted without an event of their own."""


@dataclass(frozen=True)
class Grant:
    """An accepted token: the caller is ``actor`` in ``role`` on ``campaign_id``."""

    token_id: str
    campaign_id: str
    role: Role
    actor: str
    expires_at: datetime


@dataclass(frozen=True)
class Refused:
    """A token not accepted, and the record it matched (None when it matched none)."""

    reason: Refusal
    token: AgentToken | None = None


def digest(text: str) -> str:
    """The sha256 (hex) of a token's text: what the lab keeps."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def parse_lifetime(text: str) -> timedelta:
    """``30m``, ``12h``, ``7d``, ``2w`` as a duration; UserError for anything else, for
    zero, or for more than :data:`MAX_LIFETIME`."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise UserError(
            f"--expires {text!r} is not a duration",
            "write a number and a unit: 30m, 12h, 7d or 2w",
        )
    lifetime = timedelta(seconds=int(match[1]) * _UNITS[match[2]])
    if not timedelta(0) < lifetime <= MAX_LIFETIME:
        raise UserError(
            f"--expires {text!r} is out of range",
            f"give a lifetime above zero and at most {MAX_LIFETIME.days}d",
        )
    return lifetime


def issue(
    store: Store,
    campaign_id: str,
    role: Role,
    actor: str,
    lifetime: timedelta,
    *,
    by: str = "cli",
    now: datetime | None = None,
) -> tuple[AgentToken, str]:
    """Issue a token for ``actor`` in ``role`` on ``campaign_id``, valid for ``lifetime``
    from ``now`` (default: the current time); returns its record and its text, which is kept
    nowhere else. Records a :data:`ISSUED` event with the record.

    Raises:
        UserError: ``role`` is not an agent role, or ``actor`` is not a plain name.
    """
    if not role.is_agent:
        raise UserError(
            f"a token is for an agent role, not {role}",
            "use --role main, worker, reviewer or leader",
        )
    if _ACTOR.fullmatch(actor) is None:
        raise UserError(
            f"--actor {actor[:100]!r} is not a plain name",
            "use up to 100 letters, digits and . _ @ -, starting with a letter or digit",
        )
    text = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)
    start = now or datetime.now(UTC)
    token = AgentToken(
        campaign_id=campaign_id,
        role=role,
        actor=actor,
        token_sha256=digest(text),
        expires_at=_iso(start + lifetime),
        issued_by=by,
    )
    detail = f"{token.id}: {role} {actor} until {token.expires_at}"
    _commit(store, by, ISSUED, campaign_id, detail, token)
    return token, text


def revoke(store: Store, token_id: str, *, by: str = "cli") -> AgentToken:
    """Revoke a token now and record a :data:`REVOKED` event; its holder is refused from the
    next request on, even inside an open session.

    Raises:
        UserError: there is no such token, or it is already revoked.
    """
    try:
        token = store.get_as(token_id, AgentToken)
    except NotFoundError:
        raise UserError(
            f"no token {token_id!r} in this lab", "list them with `rsilab token list`"
        ) from None
    if token.revoked_at is not None:
        raise UserError(f"token {token_id} was already revoked at {token.revoked_at}")
    token.revoked_at = _iso(datetime.now(UTC))
    token.revoked_by = by
    detail = f"{token.id}: {token.role} {token.actor}"
    _commit(store, by, REVOKED, token.campaign_id, detail, token)
    return token


def listed(store: StoreReader, campaign_id: str | None = None) -> list[AgentToken]:
    """The lab's tokens (of one campaign, when given), oldest first."""
    return store.query_as(AgentToken, campaign_id=campaign_id)


def state(token: AgentToken, now: datetime | None = None) -> str:
    """``active``, ``expired`` or ``revoked``."""
    if token.revoked_at is not None:
        return "revoked"
    return "expired" if _expired(token, now or datetime.now(UTC)) else "active"


def check(
    store: StoreReader, text: str | None, campaign_id: str, *, now: datetime | None = None
) -> Grant | Refused:
    """Whether the token ``text`` lets its holder act on ``campaign_id`` now: a
    :class:`Grant` naming the role and actor, or why not."""
    if not text:
        return Refused(Refusal.MISSING)
    if _TOKEN_TEXT.fullmatch(text) is None:
        return Refused(Refusal.UNKNOWN)
    found = store.query_as(AgentToken, fields={"token_sha256": digest(text)})
    if not found:
        return Refused(Refusal.UNKNOWN)
    token = found[0]
    if token.revoked_at is not None:
        return Refused(Refusal.REVOKED, token)
    if _expired(token, now or datetime.now(UTC)):
        return Refused(Refusal.EXPIRED, token)
    if token.campaign_id != campaign_id:
        return Refused(Refusal.OTHER_CAMPAIGN, token)
    return Grant(token.id, campaign_id, token.role, token.actor, _parse(token.expires_at))


def record_refusal(store: Store, campaign_id: str, refused: Refused, note: str) -> ProtocolFlag:
    """Record a request refused for its token: a :data:`REFUSED` event, denied, with an
    access-stage protocol flag whose rule is the reason. The actor and role are the token's
    when it matched one (its text was presented), else ``unauthenticated``; ``note`` says
    where the request came from (and how many more were refused without an event)."""
    token = refused.token
    actor = token.actor if token is not None else "unauthenticated"
    role = str(token.role) if token is not None else "unauthenticated"
    which = f"token {token.id}" if token is not None else "no known token"
    flag = ProtocolFlag(
        campaign_id=campaign_id,
        stage=FlagStage.ACCESS,
        rule=str(refused.reason),
        detail=f"MCP over HTTP refused ({which}): {note}"[:1000],
        actor=actor,
        role=role,
    )
    _commit(store, actor, REFUSED, campaign_id, flag.detail, flag, role=role, denied=True)
    return flag


def _commit(
    store: Store,
    actor: str,
    action: str,
    campaign_id: str | None,
    detail: str,
    record: Record,
    *,
    role: str = "human",
    denied: bool = False,
) -> None:
    """The one place tokens and their refusals are written: the record and its event."""
    store.commit(
        EventDraft(
            actor=actor,
            role=role,
            action=action,
            campaign_id=campaign_id,
            outcome=Outcome.DENIED if denied else Outcome.OK,
            detail=detail,
        ),
        [record],
    )


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _expired(token: AgentToken, now: datetime) -> bool:
    return now >= _parse(token.expires_at)
