"""``rsilab mcp``: serve the Experiment OS tools to an external agent over MCP, on stdio or,
with ``--http``, on MCP's streamable HTTP transport with bearer tokens."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from rsilab.cli._common import EXIT_USAGE, CampaignOption, LabOption
from rsilab.errors import UserError
from rsilab.records import Role


def mcp(
    role: Annotated[
        Role | None,
        typer.Option(
            "--role", help="Role the connected agent holds (stdio only).", show_default=False
        ),
    ] = None,
    campaign: CampaignOption = None,
    workspace: Annotated[
        Path | None,
        typer.Option("--workspace", metavar="DIR", help="The only folder tool paths may name."),
    ] = None,
    actor: Annotated[
        str | None,
        typer.Option("--actor", help="Name recorded as the caller (stdio only; default: mcp)."),
    ] = None,
    http: Annotated[
        str | None,
        typer.Option(
            "--http",
            metavar="HOST:PORT",
            help="Serve MCP over streamable HTTP at http://HOST:PORT/mcp, to bearer tokens "
            "from `rsilab token new` (port 0: any free one).",
            show_default=False,
        ),
    ] = None,
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote",
            help="With --http: allow binding an address that is not loopback (plain HTTP; "
            "put TLS in a reverse proxy).",
        ),
    ] = False,
    host_name: Annotated[
        list[str] | None,
        typer.Option(
            "--host-name",
            metavar="NAME",
            help="With --http: another name requests may address the server by (the one a "
            "reverse proxy forwards); repeatable.",
            show_default=False,
        ),
    ] = None,
    lab: LabOption = None,
) -> None:
    """Serve the tools the role may call over MCP on stdin/stdout, until the client leaves;
    or, with --http, serve a campaign over HTTP to agents on other machines.

    Every call goes through the same checks and ledger as in-process calls. An agent that
    connects from the host is limited in which tools it calls, not in what else its own
    process can read.

    Over HTTP the role and the caller's name come from each request's bearer token (issued
    by `rsilab token new`), never from the request; a request without a valid token gets 401
    and a protocol flag in the ledger. The server binds loopback unless --allow-remote is
    given; see docs/remote-agents.md for TLS through a reverse proxy.

    The lab is --lab, else $RSILAB_LAB, else ./.rsilab (a client that spawns this command
    from another folder must pass --lab or set RSILAB_LAB). When it, the campaign or the
    workspace cannot be found, the command says so in one line on stderr and exits 2 at
    once, before it speaks the protocol, so the client fails at start, not at its timeout.
    """
    try:  # lazy: the MCP SDK is needed only by this command
        if http is not None:
            from rsilab.mcp.http_server import run_http_server
        else:
            from rsilab.mcp.server import run_stdio_server
    except ImportError as exc:
        raise UserError(
            f"the MCP server cannot be loaded: {exc}",
            "install rsilab with its dependencies (the `mcp` package)",
        ) from exc
    try:
        if http is not None:
            _refuse_stdio_options(role, workspace, actor)
            run_http_server(
                lab, campaign, http, allow_remote=allow_remote, extra_names=host_name or ()
            )
            return
        if role is None:
            raise UserError(
                "--role is needed to serve MCP on stdio",
                "pass --role worker (or main, reviewer, ...)",
            )
        if allow_remote or host_name:
            raise UserError(
                "--allow-remote and --host-name go with --http",
                "add --http HOST:PORT, or leave them out",
            )
        run_stdio_server(lab, role, campaign, workspace, actor or "mcp")
    except UserError as exc:  # one line: an MCP client shows a server's stderr as it is
        print(f"error: {exc}", file=sys.stderr, flush=True)
        raise typer.Exit(EXIT_USAGE) from None


def _refuse_stdio_options(role: Role | None, workspace: Path | None, actor: str | None) -> None:
    """Over HTTP the token names the role and actor, and each actor has its own workspace."""
    given = [
        name
        for name, value in (("--role", role), ("--actor", actor), ("--workspace", workspace))
        if value is not None
    ]
    if given:
        raise UserError(
            f"{', '.join(given)} cannot be given with --http: each request's token names the "
            "role and the actor, and each actor works in LAB/workspaces/<campaign>/<actor>",
            "issue a token per agent with `rsilab token new --campaign C --role R --actor NAME`",
        )


def register(app: typer.Typer) -> None:
    """Add ``mcp`` to ``app``."""
    app.command("mcp")(mcp)
