"""``rsilab tools`` (what the Experiment OS offers) and ``rsilab call`` (one audited call)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from rsilab.cli._common import (
    EXIT_RUNTIME_FAILURE,
    CampaignOption,
    LabOption,
    UnusedLabOption,
    print_json,
    stderr_console,
    stdout_console,
)
from rsilab.errors import UserError
from rsilab.expos import CallContext, ExperimentOS, Tool, default_registry, find_campaign
from rsilab.expos.policy import TOOL_ROLES
from rsilab.expos.services import LabServices
from rsilab.records import Role
from rsilab.store import Lab

RoleOption = Annotated[Role, typer.Option("--role", help="Role the caller holds.")]


def tool_roles(tool: Tool) -> list[str]:
    """The roles allowed to call ``tool``, in the order Role lists them."""
    allowed = TOOL_ROLES.get(tool.name, frozenset())
    return [str(role) for role in Role if role in allowed]


def tool_listing(tool: Tool) -> dict[str, Any]:
    """The JSON form of one tool, as ``rsilab tools --json`` prints it."""
    return {
        "name": tool.name,
        "category": str(tool.category),
        "roles": tool_roles(tool),
        "description": tool.description,
        "input_schema": tool.input_schema(),
    }


def tools(
    role: Annotated[
        Role | None, typer.Option("--role", help="Only the tools this role may call.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON, with schemas.")] = False,
    lab: UnusedLabOption = None,
) -> None:
    """List the Experiment OS tools: category, roles allowed, and what each does."""
    listed = [t for t in default_registry().all() if role is None or role in TOOL_ROLES[t.name]]
    if as_json:
        print_json([tool_listing(t) for t in listed])
        return
    table = Table("name", "category", "roles", "summary")
    for t in listed:
        table.add_row(
            Text(t.name, style="cyan"),
            Text(str(t.category)),
            Text(", ".join(tool_roles(t))),
            Text(t.summary),
        )
    stdout_console().print(table)


def parse_args_json(text: str) -> Any:
    """The ``--args`` value as JSON; UserError naming where it stops parsing."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"--args is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno} "
            f"(character {exc.pos})",
            'pass one JSON object in single quotes, e.g. --args \'{"title": "t"}\'; '
            "see `rsilab tools --json` for each tool's arguments",
        ) from None


def _workspace(workspace: Path | None) -> Path:
    folder = (workspace or Path.cwd()).resolve()
    if not folder.is_dir():
        raise UserError(f"workspace {folder} is not a folder", "pass an existing --workspace DIR")
    return folder


def call(
    tool: Annotated[str, typer.Argument(metavar="TOOL", help="Tool name (see `rsilab tools`).")],
    role: RoleOption,
    args: Annotated[
        str, typer.Option("--args", metavar="JSON", help="Arguments as a JSON object.")
    ] = "{}",
    campaign: CampaignOption = None,
    workspace: Annotated[
        Path | None,
        typer.Option("--workspace", metavar="DIR", help="Workspace folder. Default: cwd."),
    ] = None,
    actor: Annotated[str, typer.Option("--actor", help="Name recorded as the caller.")] = "cli",
    lab: LabOption = None,
) -> None:
    """Call one tool through the Experiment OS and print its result as JSON.

    The call is checked, run and recorded exactly like an agent's. Exit 1 if the tool
    returned an error (the error JSON is still printed).
    """
    parsed = parse_args_json(args)
    folder = _workspace(workspace)
    with Lab.open(lab) as opened:
        campaign_id = find_campaign(opened.store, campaign).id if campaign else None
        ctx = CallContext(
            actor=actor,
            role=role,
            campaign_id=campaign_id,
            workspace=folder,
        )
        # one-shot: a proposal is judged before the call returns, and jobs finish before exit
        services = LabServices(opened, judge_in_background=False)
        try:
            expos = ExperimentOS(opened.store, opened.artifacts, default_registry(), services)
            result = expos.call(ctx, tool, parsed)
        finally:
            services.close(wait=True)
    print_json(result.to_dict())
    if result.seq is not None:
        stderr_console().print(Text(f"recorded as event {result.seq}", style="dim"))
    if not result.ok:
        raise typer.Exit(EXIT_RUNTIME_FAILURE)


def register(app: typer.Typer) -> None:
    """Add ``tools`` and ``call`` to ``app``."""
    app.command("tools")(tools)
    app.command("call")(call)
