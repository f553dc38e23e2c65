"""``rsilab mcp``: serve the Experiment OS tools to an external agent over MCP (stdio)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rsilab.cli._common import CampaignOption, LabOption
from rsilab.errors import UserError
from rsilab.records import Role


def mcp(
    role: Annotated[Role, typer.Option("--role", help="Role the connected agent holds.")],
    campaign: CampaignOption = None,
    workspace: Annotated[
        Path | None,
        typer.Option("--workspace", metavar="DIR", help="The only folder tool paths may name."),
    ] = None,
    actor: Annotated[str, typer.Option("--actor", help="Name recorded as the caller.")] = "mcp",
    lab: LabOption = None,
) -> None:
    """Serve the tools the role may call over MCP on stdin/stdout, until the client leaves.

    Every call goes through the same checks and ledger as in-process calls. An agent that
    connects from the host is limited in which tools it calls, not in what else its own
    process can read.
    """
    try:  # lazy: the MCP SDK is needed only by this command
        from rsilab.mcp.server import run_stdio_server
    except ImportError as exc:
        raise UserError(
            f"the MCP server cannot be loaded: {exc}",
            "install rsilab with its dependencies (the `mcp` package)",
        ) from exc
    run_stdio_server(lab, role, campaign, workspace, actor)


def register(app: typer.Typer) -> None:
    """Add ``mcp`` to ``app``."""
    app.command("mcp")(mcp)
