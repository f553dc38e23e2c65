"""``rsilab campaign new|list``: start campaigns and see what each has recorded."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from rsilab.cli._common import (
    MARKUP,
    JsonOption,
    LabOption,
    print_json,
    reading_stored_data,
    stdout_console,
)
from rsilab.errors import NotFoundError, UserError
from rsilab.expos import open_campaign
from rsilab.orchestrator.campaign import takeover_reason
from rsilab.records import Campaign, CampaignLease, lease_id
from rsilab.store import Lab, Store
from rsilab.tasks import Task, TaskLoadError, load_task

campaign_app = typer.Typer(
    help="Start and list campaigns.", no_args_is_help=True, rich_markup_mode=MARKUP
)


HOST_IMPROVERS = {"improvers": "host"}
"""A campaign made by ``campaign new`` is worked by clients on the host (an MCP client, the
Python API), not by rsilab's sandboxed agents; its settings say so."""


@campaign_app.command("new")
def new(
    task_ref: Annotated[
        str,
        typer.Argument(
            metavar="TASK",
            help="Task to improve: a name, a task.toml (or its folder), file.py[:NAME].",
        ),
    ],
    notes: Annotated[str, typer.Option("--notes", help="Free text kept with it.")] = "",
    lab: LabOption = None,
) -> None:
    """Start a campaign on a task and print its id (alone, so scripts can capture it).

    The campaign records where its task came from (an absolute path for a file), so every
    tool finds it again from any folder. Its improvers are clients on the host (an MCP
    client or the Python API), recorded as ``improvers: host``.
    """
    task = _load(task_ref)
    with Lab.open(lab) as opened:
        created = open_campaign(
            opened.store, task.ref(), settings=dict(HOST_IMPROVERS), notes=notes
        )
    typer.echo(created.id)


def _load(task_ref: str) -> Task:
    """The task ``task_ref`` names; a UserError of one line when it names one fault."""
    try:
        return load_task(task_ref)
    except TaskLoadError as exc:
        if len(exc.problems) == 1:
            raise UserError(exc.problems[0].strip(), exc.hint) from None
        raise


@campaign_app.command("list")
def list_campaigns(as_json: JsonOption = False, lab: LabOption = None) -> None:
    """List campaigns, oldest first, with how many ledger events each has.

    With --json: a JSON array, one object a campaign (id, task, state, interrupted,
    end_reason, end_detail, created_at, seed, events). A campaign recorded as running whose
    process is gone (killed, or its machine restarted) shows as interrupted: `rsilab resume`
    goes on with it.
    """
    with Lab.open(lab) as opened, reading_stored_data():
        campaigns = opened.store.query_as(Campaign)
        if as_json:
            print_json([_campaign_json(opened.store, c) for c in campaigns])
            return
        table = _campaign_table(opened.store, campaigns)
    console = stdout_console()
    if not campaigns:
        console.print("no campaigns yet; start one with `rsilab run TASK`")
        return
    console.print(table)


def _interrupted(store: Store, c: Campaign) -> str | None:
    """Why a campaign recorded as running, that ``rsilab run`` ran, has no live process now
    ('expired ...', 'dead ...', 'released': stopped before its end); None when it is
    finished, its lease's holder still counts as alive, or no ``rsilab run`` ever held it
    (a campaign made by ``campaign new`` for agents over MCP). Such a campaign goes on with
    ``rsilab resume``."""
    if c.is_finished():
        return None
    try:
        lease = store.get_as(lease_id(c.id), CampaignLease)
    except NotFoundError:
        return None
    return takeover_reason(lease, datetime.now(UTC))


def _state(store: Store, c: Campaign) -> str:
    """The recorded state, and for a running one whose process is gone, that it stopped."""
    why = _interrupted(store, c)
    return f"{c.state} (interrupted: rsilab resume)" if why else str(c.state)


def _campaign_json(store: Store, c: Campaign) -> dict[str, object]:
    """One row of ``campaign list --json``: what the table shows, unabridged, and the seed;
    ``interrupted``: why a running campaign has no live process (None when it has one or it
    ended)."""
    return {
        "id": c.id,
        "task": c.task.name,
        "state": str(c.state),
        "interrupted": _interrupted(store, c),
        "end_reason": str(c.end_reason) if c.end_reason else None,
        "end_detail": c.end_detail or None,
        "created_at": c.created_at,
        "seed": c.settings.get("seed"),
        "events": len(store.events(campaign_id=c.id)),
    }


def _campaign_table(store: Store, campaigns: list[Campaign]) -> Table:
    table = Table("id", "task", "state", "ended", "created", "events")
    table.columns[-1].justify = "right"
    for c in campaigns:
        table.add_row(
            Text(c.id, style="cyan"),
            Text(c.task.name),
            Text(_state(store, c)),
            Text(str(c.end_reason or "")),
            Text(c.created_at[:19].replace("T", " ")),
            str(len(store.events(campaign_id=c.id))),
        )
    return table


def register(app: typer.Typer) -> None:
    """Add the ``campaign`` group to ``app``."""
    app.add_typer(campaign_app, name="campaign")
