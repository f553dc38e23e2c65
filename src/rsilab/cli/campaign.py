"""``rsilab campaign new|list``: start campaigns and see what each has recorded."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from rsilab.cli._common import MARKUP, LabOption, reading_stored_data, stdout_console
from rsilab.expos import open_campaign
from rsilab.records import Campaign, TaskRef
from rsilab.store import Lab, Store

campaign_app = typer.Typer(
    help="Start and list campaigns.", no_args_is_help=True, rich_markup_mode=MARKUP
)


@campaign_app.command("new")
def new(
    task_name: Annotated[str, typer.Argument(metavar="TASK_NAME", help="Task to improve.")],
    notes: Annotated[str, typer.Option("--notes", help="Free text kept with it.")] = "",
    lab: LabOption = None,
) -> None:
    """Start a campaign on a task and print its id (alone, so scripts can capture it)."""
    with Lab.open(lab) as opened:
        created = open_campaign(opened.store, TaskRef(name=task_name, source="cli"), notes=notes)
    typer.echo(created.id)


@campaign_app.command("list")
def list_campaigns(lab: LabOption = None) -> None:
    """List campaigns, oldest first, with how many ledger events each has."""
    with Lab.open(lab) as opened, reading_stored_data():
        campaigns = opened.store.query_as(Campaign)
        table = _campaign_table(opened.store, campaigns)
    console = stdout_console()
    if not campaigns:
        console.print("no campaigns yet; start one with `rsilab run TASK`")
        return
    console.print(table)


def _campaign_table(store: Store, campaigns: list[Campaign]) -> Table:
    table = Table("id", "task", "state", "ended", "created", "events")
    table.columns[-1].justify = "right"
    for c in campaigns:
        table.add_row(
            Text(c.id, style="cyan"),
            Text(c.task.name),
            Text(str(c.state)),
            Text(str(c.end_reason or "")),
            Text(c.created_at[:19].replace("T", " ")),
            str(len(store.events(campaign_id=c.id))),
        )
    return table


def register(app: typer.Typer) -> None:
    """Add the ``campaign`` group to ``app``."""
    app.add_typer(campaign_app, name="campaign")
