"""Expert guidance for a running campaign: given by a person, read at the next planning step.

A person hands the Main agent advice with :func:`give_guidance` (``rsilab guide``); the runner
shows every :func:`unread_guidance` entry in the prompt of its next planning step and, once
that step has run, records the read with :func:`mark_guidance_read`. Each is one ledger
event (``guidance_given``, ``guidance_read``), so the ledger shows what advice a campaign got
and which step saw it, which is what an account of "guidance unstuck a plateau" needs.
"""

from __future__ import annotations

from rsilab.errors import ConflictError, NotFoundError, UserError
from rsilab.orchestrator.writer import write
from rsilab.records import Campaign, Guidance, Role, utc_now
from rsilab.store import Store

MAX_GUIDANCE_CHARS = 4000
"""Longer guidance is refused: it goes into a prompt whole."""


def give_guidance(
    store: Store, campaign_id: str, text: str, actor: str, *, role: Role = Role.HUMAN
) -> Guidance:
    """Record ``text`` as guidance for the campaign, given by ``actor``; the stored record.

    Raises:
        UserError: the text is empty or longer than :data:`MAX_GUIDANCE_CHARS`, there is
            no such campaign, or it is finished (its Main agent will never plan again).
    """
    text = text.strip()
    if not text:
        raise UserError("the guidance is empty", 'write it in quotes: rsilab guide ID "text"')
    if len(text) > MAX_GUIDANCE_CHARS:
        raise UserError(
            f"the guidance is {len(text)} characters long",
            f"keep it under {MAX_GUIDANCE_CHARS}: it goes into the Main agent's prompt whole",
        )
    try:
        campaign = store.get_as(campaign_id, Campaign)
    except NotFoundError:
        raise UserError(
            f"no campaign {campaign_id!r} in this lab", "list them with `rsilab campaign list`"
        ) from None
    if campaign.is_finished():
        raise UserError(
            f"campaign {campaign.id} is {campaign.state}: no planning step will read guidance",
            "start a new campaign with `rsilab run` and guide that one",
        )
    guidance = Guidance(campaign_id=campaign.id, text=text, given_by=actor)
    write(
        store,
        "guidance_given",
        [guidance],
        campaign_id=campaign.id,
        detail=f"{guidance.id}: {text[:200]}",
        actor=actor,
        role=role,
    )
    return guidance


def unread_guidance(store: Store, campaign_id: str) -> list[Guidance]:
    """The campaign's guidance no planning step has read yet, oldest first."""
    found = store.query_as(Guidance, campaign_id=campaign_id)
    return [g for g in found if g.read_at is None]


def mark_guidance_read(
    store: Store, guidance: Guidance, reader: str, *, role: Role = Role.MAIN
) -> Guidance:
    """Record that ``reader`` (the Main agent's actor name) has read ``guidance``.

    Returns the read record. Guidance already read (by this call earlier, or by another
    process) is returned as stored, unchanged: a read is recorded once.
    """
    current = store.get_as(guidance.id, Guidance)
    if current.read_at is not None:
        return current
    read = current.model_copy(update={"read_at": utc_now(), "read_by": reader})
    detail = f"{current.id} read at the planning step of {reader}"
    try:
        write(
            store,
            "guidance_read",
            [read],
            campaign_id=current.campaign_id,
            detail=detail,
            actor=reader,
            role=role,
        )
    except ConflictError:  # read meanwhile by someone else: theirs stands
        return store.get_as(guidance.id, Guidance)
    return read
