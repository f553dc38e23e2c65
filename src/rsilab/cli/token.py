"""``rsilab token new|list|revoke``: bearer tokens for agents that use MCP over HTTP.

:mod:`rsilab.mcp.tokens` is imported inside each command: importing ``rsilab.mcp`` loads the
MCP SDK, which the other commands do not need at start-up."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from rsilab.cli._common import (
    MARKUP,
    CampaignOption,
    JsonOption,
    LabOption,
    print_json,
    reading_stored_data,
    stdout_console,
)
from rsilab.errors import UserError
from rsilab.expos import find_campaign
from rsilab.records import AgentToken, Role
from rsilab.store import Lab

token_app = typer.Typer(
    help="Issue, list and revoke bearer tokens for `rsilab mcp --http`.",
    no_args_is_help=True,
    rich_markup_mode=MARKUP,
)


@token_app.command("new")
def new(
    role: Annotated[Role, typer.Option("--role", help="Role the holder acts in (an agent role).")],
    actor: Annotated[
        str, typer.Option("--actor", help="Name recorded as the caller of its tool calls.")
    ],
    campaign: CampaignOption = None,
    expires: Annotated[
        str, typer.Option("--expires", metavar="DURATION", help="Lifetime: 30m, 12h, 7d, 2w.")
    ] = "7d",
    as_json: JsonOption = False,
    lab: LabOption = None,
) -> None:
    """Issue a token for ACTOR in ROLE on a campaign and print it: the only time it is shown.

    The lab keeps only its sha256; issuing is a ledger event. Give the token to the agent
    (its MCP client sends `Authorization: Bearer TOKEN`); revoke it with `rsilab token revoke`.
    With --json: an object (id, token, campaign, role, actor, expires_at).
    """
    if campaign is None:
        raise UserError(
            "a token is for one campaign, and none was given",
            "pass --campaign ID (or --campaign latest); list them with `rsilab campaign list`",
        )
    from rsilab.mcp import tokens

    lifetime = tokens.parse_lifetime(expires)
    with Lab.open(lab) as opened:
        found = find_campaign(opened.store, campaign)
        record, text = tokens.issue(opened.store, found.id, role, actor, lifetime)
    if as_json:
        print_json({**_token_json(record), "token": text})
        return
    typer.echo(text)
    print(
        f"token {record.id}: {record.role} {record.actor} on {record.campaign_id} until "
        f"{record.expires_at}; it is shown only now",
        file=sys.stderr,
    )


@token_app.command("list")
def list_tokens(
    campaign: CampaignOption = None, as_json: JsonOption = False, lab: LabOption = None
) -> None:
    """List tokens (of one campaign with --campaign), oldest first: id, campaign, role,
    actor, state (active, expired, revoked), expiry. The tokens themselves are not kept.

    With --json: a JSON array, one object a token.
    """
    from rsilab.mcp import tokens

    with Lab.open(lab) as opened, reading_stored_data():
        campaign_id = find_campaign(opened.store, campaign).id if campaign else None
        found = tokens.listed(opened.store, campaign_id)
    if as_json:
        print_json([_token_json(t) for t in found])
        return
    console = stdout_console()
    if not found:
        console.print("no tokens yet; issue one with `rsilab token new`")
        return
    table = Table("id", "campaign", "role", "actor", "state", "expires")
    for t in found:
        table.add_row(
            Text(t.id, style="cyan"),
            Text(t.campaign_id or ""),
            Text(str(t.role)),
            Text(t.actor),
            Text(tokens.state(t)),
            Text(t.expires_at),
        )
    console.print(table)


@token_app.command("revoke")
def revoke(
    token_id: Annotated[str, typer.Argument(metavar="ID", help="The token's id (tok-...).")],
    lab: LabOption = None,
) -> None:
    """Revoke a token now: its holder is refused from the next request on, even inside an
    open session. Revoking is a ledger event."""
    from rsilab.mcp import tokens

    with Lab.open(lab) as opened:
        record = tokens.revoke(opened.store, token_id)
    typer.echo(f"revoked {record.id} ({record.role} {record.actor})")


def _token_json(t: AgentToken) -> dict[str, object]:
    from rsilab.mcp import tokens

    return {
        "id": t.id,
        "campaign": t.campaign_id,
        "role": str(t.role),
        "actor": t.actor,
        "state": tokens.state(t),
        "expires_at": t.expires_at,
        "created_at": t.created_at,
        "revoked_at": t.revoked_at,
    }


def register(app: typer.Typer) -> None:
    """Add the ``token`` group to ``app``."""
    app.add_typer(token_app, name="token")
