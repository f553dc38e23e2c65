"""Intents: a campaign runner writes what it is about to do before it does it.

Each side effect has an idempotency key unique in its campaign (e.g. ``exp:<direction>:3``);
the intent's id derives from (campaign, key), so one key can never have two intents. The
protocol, per side effect::

    step = begin(store, campaign_id, key, "create_experiment", payload)
    if isinstance(step, DoneIntent):
        experiment_id = step.result["experiment_id"]      # done before a crash: not repeated
    else:
        experiment = ...                                  # attempt step.attempts
        complete(store, step, {"experiment_id": experiment.id}, writes=[experiment])

Exactly once needs the effect and its completion to land together. When the effect is a
record, pass it in ``writes``: it is committed with the intent's ``done`` state in one
transaction, so a crash leaves either both or neither, and a pending intent means the effect
did not happen. An effect outside the store (a sandbox job) may have happened before a crash;
re-running it is a new attempt, so such effects must be safe to repeat or findable by key.

Completing is a compare-and-swap on the intent, so it also fences a stalled runner: once a
new lease holder has begun the same key again, the old holder's completion conflicts and
nothing of it is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rsilab.errors import ConflictError, NotFoundError
from rsilab.orchestrator.writer import ACTOR, write
from rsilab.records import (
    Intent,
    IntentState,
    Record,
    intent_id,
    utc_now,
)
from rsilab.store import Store


@dataclass(frozen=True)
class DoneIntent:
    """An intent already carried out: its side effect must not be repeated."""

    intent: Intent

    @property
    def result(self) -> dict[str, Any]:
        """What the side effect produced."""
        return dict(self.intent.result or {})


def begin(
    store: Store,
    campaign_id: str,
    key: str,
    action: str,
    payload: dict[str, Any] | None = None,
    *,
    actor: str = ACTOR,
) -> Intent | DoneIntent:
    """Record that the side effect ``key`` is about to be performed.

    Returns a pending :class:`Intent` to carry out now (``attempts`` is 1 the first time and
    one more after each interrupted attempt) or a :class:`DoneIntent` whose result stands.
    Raises ConflictError when ``key`` was abandoned, was begun with another action or
    payload (one key, one side effect), or another process begins it at the same moment.
    """
    payload = payload or {}
    try:
        current = store.get_as(intent_id(campaign_id, key), Intent)
    except NotFoundError:
        intent = Intent(campaign_id=campaign_id, key=key, action=action, payload=payload)
        _commit(store, intent, actor, "intent_begun")
        return intent
    if (current.action, current.payload) != (action, payload):
        raise ConflictError(
            f"intent {key!r} of campaign {campaign_id} was begun as {current.action} "
            f"{current.payload}; one key names one side effect"
        )
    if current.state is IntentState.DONE:
        return DoneIntent(current)
    if current.state is IntentState.ABANDONED:
        raise ConflictError(f"intent {key!r} was abandoned ({current.reason}); use a new key")
    retry = current.model_copy(update={"attempts": current.attempts + 1})
    _commit(store, retry, actor, "intent_retried")
    return retry


def complete(
    store: Store,
    intent: Intent,
    result: dict[str, Any],
    *,
    writes: Sequence[Record] = (),
    actor: str = ACTOR,
) -> Intent:
    """Mark ``intent`` done with ``result``, committing ``writes`` (the effect) with it.

    Returns the done intent. Raises ConflictError, writing nothing, when the intent changed
    since ``intent`` was read (another process began it again, or completed it).
    """
    done = intent.model_copy(
        update={"state": IntentState.DONE, "result": result, "finished_at": utc_now()}
    )
    _commit(store, done, actor, "intent_done", writes)
    return done


def abandon(store: Store, intent: Intent, reason: str, *, actor: str = ACTOR) -> Intent:
    """Mark ``intent`` abandoned: its side effect will not be performed under this key."""
    gone = intent.model_copy(
        update={"state": IntentState.ABANDONED, "reason": reason, "finished_at": utc_now()}
    )
    _commit(store, gone, actor, "intent_abandoned")
    return gone


def pending_intents(store: Store, campaign_id: str) -> list[Intent]:
    """The campaign's intents begun but neither done nor abandoned, oldest first."""
    return store.query_as(
        Intent, campaign_id=campaign_id, fields={"state": str(IntentState.PENDING)}
    )


def _commit(
    store: Store, intent: Intent, actor: str, action: str, writes: Sequence[Record] = ()
) -> None:
    detail = f"{intent.key} ({intent.action}, attempt {intent.attempts})"
    write(
        store, action, [intent, *writes], campaign_id=intent.campaign_id, detail=detail, actor=actor
    )


class Intents:
    """The intents of one campaign, for the policy that runs it (the module's functions,
    bound to the campaign). The lifecycle makes one per run and hands it to the policy."""

    def __init__(self, store: Store, campaign_id: str) -> None:
        self.store, self.campaign_id = store, campaign_id

    def begin(
        self, key: str, action: str, payload: dict[str, Any] | None = None, *, actor: str = ACTOR
    ) -> Intent | DoneIntent:
        """:func:`begin` on this campaign."""
        return begin(self.store, self.campaign_id, key, action, payload, actor=actor)

    def complete(
        self,
        intent: Intent,
        result: dict[str, Any],
        *,
        writes: Sequence[Record] = (),
        actor: str = ACTOR,
    ) -> Intent:
        """:func:`complete`."""
        return complete(self.store, intent, result, writes=writes, actor=actor)

    def abandon(self, intent: Intent, reason: str, *, actor: str = ACTOR) -> Intent:
        """:func:`abandon`."""
        return abandon(self.store, intent, reason, actor=actor)

    def pending(self) -> list[Intent]:
        """:func:`pending_intents` of this campaign."""
        return pending_intents(self.store, self.campaign_id)
