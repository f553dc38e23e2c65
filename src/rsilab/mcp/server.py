"""The Experiment OS served over MCP with the official ``mcp`` SDK (low-level ``Server``).

Why the low-level server: our tools already carry their JSON schemas (``Tool.input_schema()``,
built once from their signatures) and their own dispatcher (``ExperimentOS.call``). The
decorator-style ``MCPServer`` rebuilds a schema from each Python function and validates
arguments itself, so a bad call would be refused before our dispatcher saw it (and never
reach the ledger), and an unknown or forbidden tool would be answered by the SDK, not by our
policy. The low-level ``Server`` takes a ``tools/list`` handler and a ``tools/call`` handler
instead: the listing hands out our schemas unchanged, and every call, whatever its name or
arguments, goes through ``ExperimentOS.call`` -- role check, validation, guards, tool body and
one ledger event -- exactly like an in-process call. The SDK checks a request's params against
the protocol's schema before any handler runs, and would answer ``arguments`` that are not an
object (a list, a number, a string) with a protocol error of its own; a middleware
(:func:`_keep_raw_arguments`) hands such arguments past that check to our handler, so the
dispatcher refuses them (``invalid_arguments``) and the ledger records the call. Before the
SDK reads a line at all, :func:`rsilab.mcp.wire.read` refuses what no honest client sends
(over 8 MiB, nested past 128 levels, not UTF-8, not JSON, ``params`` that are not an
object): the client gets a JSON-RPC error, and the ledger a denied event with a protocol
flag (``ExperimentOS.refused_message``), as for a call a guard refused.

What a client sees:

- ``tools/list``: the tools the context's role may call (``ExperimentOS.tools_for``), each with
  its name, description and input schema.
- ``tools/call``: success is the tool's JSON value as text content and as structured
  content; a failure is a result with ``isError`` true whose text (and structured content) is
  the JSON error payload (``ToolResult.to_dict()``). A tool the role may not call is refused
  by the dispatcher too, so the refusal is recorded with a protocol flag, not merely hidden.
  ``_meta["rsilab/ledger_seq"]`` names the ledger event of the call.

Limits, said plainly: an agent that connects to ``rsilab mcp`` from the host is limited in
which tools it calls, not in what else its own process can read. Its process can still open
the lab's files, the private test data and anything else the user can read; only an agent
that rsilab starts inside the sandbox (``rsilab agent -- CMD``) is held to the full rules.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import json
import logging
import os
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult

from rsilab.errors import UserError
from rsilab.expos import (
    CallContext,
    ExperimentOS,
    ToolResult,
    default_registry,
    find_campaign,
)
from rsilab.expos.context import check_workspace
from rsilab.expos.services import LabServices
from rsilab.mcp._lines import FdStream, serve_stream
from rsilab.mcp.wire import RecordRefusal
from rsilab.records import Role
from rsilab.store.lab import Lab

log = logging.getLogger(__name__)

SERVER_NAME = "rsilab"
LEDGER_SEQ_META = "rsilab/ledger_seq"
"""Result ``_meta`` key holding the sequence number of the call's ledger event."""


def _version() -> str:
    try:
        return importlib.metadata.version("rsilab")
    except importlib.metadata.PackageNotFoundError:
        return ""


def _instructions(ctx: CallContext) -> str:
    campaign = f" on campaign {ctx.campaign_id}" if ctx.campaign_id else ""
    return (
        f"rsilab Experiment OS. You act as {ctx.actor!r} in the {ctx.role} role{campaign}. "
        "Every tool call is role-checked, validated and recorded in the lab's ledger; a failed "
        "call returns a JSON error naming the argument at fault. Numbers you log are marked "
        "agent-reported and never count: only the controller's private evaluations do."
    )


def tool_listing(expos: ExperimentOS, role: Role) -> types.ListToolsResult:
    """The ``tools/list`` answer for ``role``: exactly the tools policy lets it call."""
    return types.ListToolsResult(
        tools=[
            types.Tool(name=t.name, description=t.description, input_schema=t.input_schema())
            for t in expos.tools_for(role)
        ]
    )


def call_result(result: ToolResult) -> types.CallToolResult:
    """A dispatcher result as an MCP tool result (``isError`` for a ToolError)."""
    payload = result.to_dict()
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(payload, ensure_ascii=False))],
        structured_content=payload,
        is_error=not result.ok,
        _meta={LEDGER_SEQ_META: result.seq},
    )


_RAW_ARGUMENTS: ContextVar[tuple[Any] | None] = ContextVar("rsilab_raw_arguments", default=None)
"""The ``arguments`` of the ``tools/call`` being handled when they are not an object."""


async def _keep_raw_arguments(
    ctx: ServerRequestContext[Any, Any], call_next: CallNext
) -> HandlerResult:
    """Let a ``tools/call`` whose ``arguments`` are not an object reach the handler.

    The SDK would refuse it before any handler (its params schema wants an object); here
    such arguments are set aside for the handler and replaced by none on their way through
    the SDK's check. A call without a string ``name`` is left to the SDK's own refusal.
    """
    params = ctx.params
    if (
        ctx.method != "tools/call"
        or not isinstance(params, Mapping)
        or not isinstance(params.get("name"), str)
        or params.get("arguments") is None
        or isinstance(params.get("arguments"), dict)
    ):
        return await call_next(ctx)
    token = _RAW_ARGUMENTS.set((params["arguments"],))
    try:
        passed = {**params, "arguments": None}
        return await call_next(dataclasses.replace(ctx, params=passed))
    finally:
        _RAW_ARGUMENTS.reset(token)


def build_server(expos: ExperimentOS, ctx: CallContext) -> Server[Any]:
    """An MCP server exposing the tools ``ctx.role`` may call; every call goes through ``expos``.

    Calls run in a worker thread (the store is thread-safe), so a slow store write does not
    stall the event loop; a cancelled request still finishes and records its event.
    """
    listing = tool_listing(expos, ctx.role)

    async def list_tools(
        _rctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return listing

    async def call_tool(
        _rctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        raw = _RAW_ARGUMENTS.get()
        arguments = raw[0] if raw is not None else params.arguments
        result = await anyio.to_thread.run_sync(expos.call, ctx, params.name, arguments)
        return call_result(result)

    server: Server[Any] = Server(
        SERVER_NAME,
        version=_version(),
        instructions=_instructions(ctx),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    server.middleware.append(_keep_raw_arguments)
    return server


def _require_campaign(role: Role, campaign_ref: str | None) -> None:
    if campaign_ref is None and role.is_agent:
        raise UserError(
            f"the {role} role works inside a campaign, and none was given",
            "pass --campaign ID (or --campaign latest); list them with `rsilab campaign list`",
        )


def _workspace(workspace: Path | None) -> Path | None:
    if workspace is None:
        return None
    if not workspace.is_dir():
        raise UserError(
            f"workspace {workspace} is not a folder", "create it first, or leave --workspace out"
        )
    return workspace.resolve()


@contextlib.contextmanager
def _claimed_stdio() -> Iterator[FdStream]:
    """The wire (fds 0 and 1) as a byte stream, with fd 0 pointed at the null device and fd 1
    at stderr meanwhile (as the SDK's stdio transport does), so a child process never reads
    the wire and stray output never corrupts it."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    try:
        yield FdStream(wire_in, wire_out)
    finally:
        for fd, wire in ((0, wire_in), (1, wire_out)):
            with contextlib.suppress(OSError):
                os.dup2(wire, fd)
            os.close(wire)


async def _serve_stdio(server: Server[Any], recorder: RecordRefusal) -> None:
    with _claimed_stdio() as wire:
        await serve_stream(server, wire, recorder)


def run_stdio_server(
    lab_path: Path | None,
    role: Role,
    campaign_ref: str | None,
    workspace: Path | None,
    actor: str,
) -> None:
    """Serve the Experiment OS on stdin/stdout until the client disconnects.

    Opens the lab (``Lab.open``: ``lab_path``, else ``$RSILAB_LAB``, else ``./.rsilab``),
    resolves the campaign (agent roles need one) and closes the lab at the end. Only MCP
    messages go to stdout; logs go to stderr.

    Raises:
        UserError: no lab there, no such campaign, an agent role without a campaign, or a
            workspace that is not a folder or that is, holds or lies inside the lab or its
            key folder (``LAB/workspaces/<id>`` is allowed) -- all before anything is served.
    """
    _require_campaign(role, campaign_ref)
    ws = _workspace(workspace)
    with Lab.open(lab_path) as lab:
        if ws is not None:
            check_workspace(ws, lab.artifacts)  # never the lab, nor holding it, nor inside it
        campaign_id = find_campaign(lab.store, campaign_ref).id if campaign_ref else None
        ctx = CallContext(actor=actor, role=role, campaign_id=campaign_id, workspace=ws)
        services = LabServices(lab)
        try:
            expos = ExperimentOS(lab.store, lab.artifacts, default_registry(), services)
            log.info(
                "serving %s tools to %s (%s) over stdio", len(expos.tools_for(role)), actor, role
            )
            recorder = partial(expos.refused_message, ctx)
            anyio.run(_serve_stdio, build_server(expos, ctx), recorder)
        finally:
            services.close(wait=True)  # let a proposal being judged reach its verdict
