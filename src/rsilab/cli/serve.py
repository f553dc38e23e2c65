"""``rsilab mcp``: serve the Experiment OS tools to an external agent over MCP (stdio)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from rsilab.cli._common import EXIT_USAGE, CampaignOption, LabOption
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

    The lab is --lab, else $RSILAB_LAB, else ./.rsilab (a client that spawns this command
    from another folder must pass --lab or set RSILAB_LAB). When it, the campaign or the
    workspace cannot be found, the command says so in one line on stderr and exits 2 at
    once, before it speaks the protocol, so the client fails at start, not at its timeout.
    """
    try:  # lazy: the MCP SDK is needed only by this command
        from rsilab.mcp.server import run_stdio_server
    except ImportError as exc:
        raise UserError(
            f"the MCP server cannot be loaded: {exc}",
            "install rsilab with its dependencies (the `mcp` package)",
        ) from exc
    try:
        run_stdio_server(lab, role, campaign, workspace, actor)
    except UserError as exc:  # one line: an MCP client shows a server's stderr as it is
        print(f"error: {exc}", file=sys.stderr, flush=True)
        raise typer.Exit(EXIT_USAGE) from None


def register(app: typer.Typer) -> None:
    """Add ``mcp`` to ``app``."""
    app.command("mcp")(mcp)
