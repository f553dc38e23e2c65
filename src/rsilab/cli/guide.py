"""``rsilab guide CAMPAIGN "text"``: hand a campaign's Main agent expert guidance."""

from __future__ import annotations

import getpass
from typing import Annotated

import typer
from rich.text import Text

from rsilab.cli._common import LabOption, stdout_console
from rsilab.store import Lab


def _person() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no user name in this environment (some containers)
        return "human"


def guide(
    campaign: Annotated[str, typer.Argument(metavar="CAMPAIGN", help="Campaign id or latest.")],
    text: Annotated[str, typer.Argument(metavar="TEXT", help="The guidance, in quotes.")],
    by: Annotated[
        str | None,
        typer.Option("--by", metavar="NAME", help="Who gives it. Default: your user name."),
    ] = None,
    lab: LabOption = None,
) -> None:
    """Give the Main agent of CAMPAIGN guidance; it is read at the next planning step.

    The guidance and its reading are both recorded in the ledger. A finished campaign takes
    none (it plans no more); a stopped one reads it when resumed.
    """
    from rsilab.expos.campaigns import find_campaign
    from rsilab.orchestrator.research.guidance import give_guidance
    from rsilab.records import CampaignState

    with Lab.open(lab) as opened:
        found = find_campaign(opened.store, campaign)
        given = give_guidance(opened.store, found.id, text, by or _person())
    console = stdout_console()
    console.print(
        Text(f"guidance {given.id} for campaign {found.id}: read at the next planning step"),
        soft_wrap=True,
    )
    if found.state == CampaignState.STOPPED:
        console.print(
            Text(f"the campaign is stopped: continue it with `rsilab resume {found.id}`", "yellow"),
            soft_wrap=True,
        )


def register(app: typer.Typer) -> None:
    """Add ``guide`` to ``app``."""
    app.command("guide")(guide)
