"""Lines the MCP SDK cannot read, made into requests it answers.

The SDK reads each line with pydantic's JSON parser, which refuses a document nesting deeper
than 200 levels, and with the JSON-RPC message schema; a line it cannot read is dropped
without a reply, even when it is a request with an id. Every transport of ours passes each
line through :func:`repair` first:

- a ``tools/call`` whose ``arguments`` nest too deeply for the SDK keeps its id and name,
  with its arguments cut at :data:`KEPT_DEPTH` levels: it still nests deeper than the
  dispatcher allows (64), so the dispatcher refuses it (``invalid_arguments``) and the ledger
  records the call;
- any other request with an id that the schema refuses (``params`` as a string, a method
  that is not text) becomes a call of :data:`MALFORMED`, which :func:`answer_malformed`
  answers with a JSON-RPC ``Invalid Request`` error naming the problem.

A line that is not JSON, or a notification (no id), is passed on unchanged: there is no one
to answer (JSON-RPC gives a parse error no id the client could match).
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

MALFORMED = "rsilab/malformed_request"
"""The method a request the SDK could not read is turned into (answered as an error)."""

KEPT_DEPTH = 100
"""Levels of ``arguments`` kept when the SDK cannot read them: deeper than the dispatcher's
limit (64), well inside pydantic's (200)."""

INVALID_REQUEST = -32600
"""JSON-RPC 2.0's code for a request that is not a valid Request object."""


def repair(line: str | bytes) -> str | bytes:
    """``line`` unchanged when the SDK can read it, else a request it answers (see module)."""
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        return line
    except ValidationError as exc:
        problem = _problem(exc)
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return line  # not JSON (or deeper than Python reads): no id to answer
    if not isinstance(message, dict) or "method" not in message or not _is_id(message.get("id")):
        return line  # a notification or a response: nothing to answer
    params = message.get("params")
    if (
        message.get("method") == "tools/call"
        and isinstance(params, dict)
        and isinstance(params.get("name"), str)
        and "arguments" in params
    ):
        cut = {**message, "params": {**params, "arguments": _cut(params["arguments"], KEPT_DEPTH)}}
        text = json.dumps(cut)
        try:
            types.jsonrpc_message_adapter.validate_json(text, by_name=False)
            return text
        except ValidationError as again:
            problem = _problem(again)
    malformed = {"problem": problem, "method": str(message.get("method"))[:200]}
    return json.dumps(
        {"jsonrpc": "2.0", "id": message["id"], "method": MALFORMED, "params": malformed}
    )


async def answer_malformed(
    ctx: ServerRequestContext[Any, Any], call_next: CallNext
) -> HandlerResult:
    """Answer a request :func:`repair` marked as malformed with ``Invalid Request``."""
    if ctx.method != MALFORMED:
        return await call_next(ctx)
    params = ctx.params if isinstance(ctx.params, dict) else {}
    raise MCPError(
        code=INVALID_REQUEST,
        message=f"invalid request: {params.get('problem', 'not a JSON-RPC request')}",
    )


def _is_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _problem(exc: ValidationError) -> str:
    """The first thing the schema refused, in a short line."""
    errors = exc.errors(include_url=False, include_input=False)
    if not errors:
        return "not a JSON-RPC message"
    first = errors[0]
    where = ".".join(str(p) for p in first["loc"][-2:])
    return f"{where}: {first['msg']}"[:300] if where else str(first["msg"])[:300]


def _cut(value: Any, depth: int) -> Any:
    """``value`` with everything below ``depth`` levels dropped (iteratively: no recursion
    limit is met, however deep the value)."""
    root: list[Any] = [None]
    stack: list[tuple[Any, list[Any] | dict[str, Any], int | str, int]] = [(value, root, 0, 0)]
    while stack:
        item, parent, key, level = stack.pop()
        if isinstance(item, dict | list) and level >= depth:
            copy: Any = type(item)()
        elif isinstance(item, dict):
            copy = {}
            stack.extend((v, copy, k, level + 1) for k, v in item.items())
        elif isinstance(item, list):
            copy = [None] * len(item)
            stack.extend((v, copy, i, level + 1) for i, v in enumerate(item))
        else:
            copy = item
        parent[key] = copy  # type: ignore[index]
    return root[0]
