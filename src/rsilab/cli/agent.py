"""``rsilab agent``: run an external coding agent confined to the sandbox, as a campaign Worker.

The mechanism lives in :mod:`rsilab.mcp.agent_run`; this module parses options, streams CMD's
output to the terminal and turns its end into rsilab's exit status.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from rsilab.cli._common import EXIT_INTERRUPTED, LabOption, stderr_console
from rsilab.errors import UserError
from rsilab.records import Role


def _seconds(text: str) -> float:
    from rsilab.tasks import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise UserError(f"bad --wall: {exc}", "e.g. --wall 45m or --wall 2h") from None


def _megabytes(option: str, text: str) -> int:
    from rsilab.controller.lab_settings import parse_size

    try:
        size = parse_size(text) >> 20
    except ValueError as exc:
        raise UserError(f"bad {option}: {exc}", f"e.g. {option} 4G or {option} 512M") from None
    if size < 1:
        raise UserError(f"bad {option}: {text!r} is under a megabyte", f"e.g. {option} 4G")
    return size


def _env(pairs: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:  # NAME alone: pass the caller's value on
            if name not in os.environ:
                raise UserError(
                    f"--env {name}: no such variable in your environment",
                    f"pass --env {name}=VALUE, or export {name} first",
                )
            value = os.environ[name]
        env[name] = value
    return env


def _relay(fd: int, chunk: bytes) -> None:
    """CMD's output onto ours as it arrives (stdout to stdout, stderr to stderr)."""
    stream = sys.stdout if fd == 1 else sys.stderr
    stream.buffer.write(chunk)
    stream.buffer.flush()


def agent(
    command: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="CMD",
            help="The agent's command and its arguments, after `--`; it runs inside the sandbox.",
            show_default=False,
        ),
    ] = None,
    campaign: Annotated[
        str,
        typer.Option("--campaign", metavar="ID|latest", help="Campaign id, or 'latest'."),
    ] = "",
    role: Annotated[
        Role, typer.Option("--role", help="Role the agent holds: worker (or reviewer).")
    ] = Role.WORKER,
    actor: Annotated[
        str, typer.Option("--actor", help="Name recorded as the caller; names its workspace.")
    ] = "worker-ext-1",
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace",
            metavar="DIR",
            help="Folder shown at /workspace. Default: LAB/workspaces/CAMPAIGN/ACTOR.",
            show_default=False,
        ),
    ] = None,
    wall: Annotated[str, typer.Option("--wall", help="Wall-clock limit, e.g. 45m.")] = "1h",
    memory: Annotated[str, typer.Option("--memory", help="Memory of the agent's tree.")] = "4G",
    disk: Annotated[
        str, typer.Option("--disk", help="What it may write (workspace and /tmp).")
    ] = "2G",
    env: Annotated[
        list[str] | None,
        typer.Option(
            "--env",
            metavar="NAME[=VALUE]",
            help="A variable for the agent (repeatable); NAME alone passes yours.",
            show_default=False,
        ),
    ] = None,
    llm_endpoint: Annotated[
        list[str] | None,
        typer.Option(
            "--llm-endpoint",
            metavar="HOST:PORT",
            help="An LLM endpoint the agent may reach (repeatable, up to 8); nothing else is.",
            show_default=False,
        ),
    ] = None,
    bind_ro: Annotated[
        list[Path] | None,
        typer.Option(
            "--bind-ro",
            metavar="DIR",
            help="A folder shown read-only at its own path, e.g. the agent's installation "
            "(repeatable); never in the workspace, so never in a snapshot.",
            show_default=False,
        ),
    ] = None,
    lab: LabOption = None,
) -> None:
    """Run an external agent's CMD inside the sandbox, as a Worker of a campaign.

    CMD sees its workspace (read-write, at /workspace) and the Experiment OS over MCP
    (at /rsilab: the socket, the `rsilab-mcp` bridge command and an `mcp.json` config;
    $RSILAB_MCP_COMMAND and $RSILAB_MCP_CONFIG name them), and nothing else: no network,
    no lab, no private data. Every tool call is checked and recorded as with `rsilab mcp`.
    Needs bubblewrap: without it, this refuses rather than run CMD unconfined.

    With --llm-endpoint HOST:PORT, the agent can reach that endpoint (and only it) at the
    same HOST:PORT inside, so its usual base URL works; bytes are relayed untouched (TLS
    stays end to end) and each connection is recorded in the ledger.

    With --bind-ro DIR, the agent's own installation (outside the lab and the workspace) is
    visible read-only at DIR, e.g. `--bind-ro /opt/agents/claude-code -- \
    /opt/agents/claude-code/node_modules/.bin/claude -p ...`.

    The session is recorded in the ledger (its command, start, end and exit status). Output
    past 64 MiB a stream is dropped, and counted in the ledger; the agent goes on.

    CMD's stdin is empty (run the agent headless); its output streams here. The exit
    status is CMD's, 128+N if signal N ended it, 137 if a limit did.
    """
    from rsilab.mcp.agent_run import AgentOptions, exit_status, run_agent

    if not campaign:
        raise UserError(
            "`rsilab agent` runs the agent inside a campaign, and none was given",
            "pass --campaign ID (or --campaign latest); list them with `rsilab campaign list`",
        )
    options = AgentOptions(
        argv=tuple(command or ()),
        campaign=campaign,
        role=role,
        actor=actor,
        workspace=workspace,
        lab=lab,
        wall_s=_seconds(wall),
        memory_mb=_megabytes("--memory", memory),
        disk_mb=_megabytes("--disk", disk),
        env=_env(env or []),
        llm_endpoints=tuple(llm_endpoint or ()),
        bind_ro=tuple(bind_ro or ()),
    )
    try:
        result = run_agent(options, _relay)
    except KeyboardInterrupt:
        stderr_console().print(Text("rsilab agent: interrupted; the agent was stopped"))
        raise typer.Exit(EXIT_INTERRUPTED) from None
    if result.killed is not None:
        stderr_console().print(
            Text(f"rsilab agent: the agent was stopped: {result.killed} limit", style="yellow")
        )
    raise typer.Exit(exit_status(result))


def register(app: typer.Typer) -> None:
    """Add ``agent`` to ``app``."""
    app.command(
        "agent",
        context_settings={"allow_interspersed_args": False},
    )(agent)
