"""Where bytes from an MCP client become a JSON-RPC message: once, for every transport.

Every transport of ours (stdio, the Unix socket, streamable HTTP) hands each message it
framed -- a line, or a POST body -- to :func:`read`, and nothing else parses client bytes
before it. :func:`read` gives either a message the SDK's session can take, or a
:class:`Refusal` the transport answers with at once, as a JSON-RPC error:

- a message over :data:`MAX_MESSAGE_BYTES` bytes, one nesting arrays or objects deeper than
  :data:`MAX_DEPTH` levels, one that is not UTF-8, and one the JSON-RPC schema refuses get
  ``Invalid Request`` (-32600) naming what was wrong (and the limit it broke);
- what is not JSON at all gets ``Parse error`` (-32700).

The error carries the request's own id whenever one can be read from the message (so a
client waiting on that id is answered, not left hanging), else ``null``, as JSON-RPC says.
Depth is measured on the text, without recursion, before anything nests: a document a
hundred thousand levels deep costs one pass over its bytes, never a recursion error.

Before it answers, the transport hands the refusal's problem to its :data:`RecordRefusal`
(:func:`record`): for every transport of ours, ``ExperimentOS.refused_message`` with the
caller's context, which writes one denied event and one protocol flag to the lab's ledger
(one per refused message: as many as the calls the same client could make instead). The
transport then goes on serving the next message.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
import mcp_types as types
from pydantic import ValidationError

MAX_DEPTH = 128
"""The deepest a message may nest arrays and objects, counting its own outer object. A tool
call's ``arguments`` sit three levels down, so they may nest past the dispatcher's own limit
(64) and be refused there, with a ledger event; beyond this the wire refuses them. Well
inside the SDK's JSON parser (200) and Python's recursion limit."""

MAX_MESSAGE_BYTES = 8 * 1024 * 1024
"""The longest message, in bytes, on every transport: room for the largest ``write_file``
(1 Mi characters) even with each one escaped as ``\\uXXXX``."""

PARSE_ERROR = -32700
"""JSON-RPC 2.0's code for a message that is not JSON."""

INVALID_REQUEST = -32600
"""JSON-RPC 2.0's code for a message that is not a valid Request object."""

RecordRefusal = Callable[[str], object]
"""Writes one refused message's problem to the ledger, for the caller of the session (or
request) it came on; may block, and may raise when the ledger cannot take it."""

log = logging.getLogger(__name__)

_STRUCTURE = re.compile(r'["\[\]{}]')


@dataclass(frozen=True)
class Refusal:
    """A message refused at the wire: the JSON-RPC error to answer it with."""

    code: int
    """:data:`PARSE_ERROR` or :data:`INVALID_REQUEST`."""
    problem: str
    """What was wrong, in one line (the limit it broke, when one did)."""
    id: str | int | None = None
    """The request's id, when one could be read; ``None`` answers with ``null``."""

    def response(self) -> types.JSONRPCError:
        """The JSON-RPC error answering the refused message."""
        kind = "parse error" if self.code == PARSE_ERROR else "invalid request"
        error = types.ErrorData(code=self.code, message=f"{kind}: {self.problem}")
        return types.JSONRPCError(jsonrpc="2.0", id=self.id, error=error)

    def to_json(self) -> bytes:
        """:meth:`response` as the bytes of one JSON document."""
        return self.response().model_dump_json(by_alias=True, exclude_unset=True).encode()


async def record(recorder: RecordRefusal, refusal: Refusal) -> None:
    """Hand ``refusal``'s problem to ``recorder`` in a worker thread (a ledger commit must
    not stall the event loop), before the transport answers. Never raises for the ledger:
    a failure to record is logged, and the client is answered all the same, since the
    session must outlive a lab that is briefly unavailable."""
    try:
        await anyio.to_thread.run_sync(recorder, refusal.problem)
    except Exception:
        log.exception("an MCP message refused at the wire could not be recorded")


def too_long(size: int) -> Refusal:
    """The refusal of a message of ``size`` bytes, over :data:`MAX_MESSAGE_BYTES`."""
    return Refusal(
        INVALID_REQUEST,
        f"the message is {size} bytes, over the limit of {MAX_MESSAGE_BYTES} bytes; "
        "send less in one message",
    )


def read(raw: bytes) -> types.JSONRPCMessage | Refusal:
    """One framed message as the SDK's JSON-RPC message, or the :class:`Refusal` to answer.

    Never raises, whatever ``raw`` holds; the cost is linear in its length.
    """
    if len(raw) > MAX_MESSAGE_BYTES:
        return too_long(len(raw))
    problem = ""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        problem = f"not UTF-8 (byte {exc.start} is not valid there); send UTF-8 text"
        text = raw.decode("utf-8", "replace")  # only to find the id to answer
    text, deep = _cut_deep(text)
    if deep and not problem:
        problem = f"it nests arrays or objects deeper than {MAX_DEPTH} levels (the limit)"
    if not problem:
        try:
            return types.jsonrpc_message_adapter.validate_json(text, by_name=False)
        except ValidationError as exc:
            problem = _problem(exc)
    try:
        value = json.loads(text)  # lenient, and never deep now: only to find the id
    except (ValueError, RecursionError):
        return Refusal(
            PARSE_ERROR, problem if problem.startswith("not JSON") else f"not JSON: {problem}"
        )
    return Refusal(INVALID_REQUEST, problem, _id_of(value))


def _cut_deep(text: str) -> tuple[str, bool]:
    """``text`` with every array or object that opens deeper than :data:`MAX_DEPTH` levels
    replaced by ``null``, and whether any was. One pass over the structural characters, no
    recursion; brackets inside strings do not count. Text that is not JSON may come out
    unchanged or cut: either way it stays not JSON, and never deeper than the limit up to
    the point where a parser would stop."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return text, False  # too few brackets to nest past the limit
    pieces: list[str] = []
    kept_to = 0
    depth = 0
    cut_at: int | None = None
    in_string = False
    for found in _STRUCTURE.finditer(text):
        char, at = found.group(), found.start()
        if char == '"':
            if not in_string or not _escaped(text, at):
                in_string = not in_string
        elif in_string:
            continue
        elif char in "[{":
            depth += 1
            if depth == MAX_DEPTH + 1 and cut_at is None:
                cut_at = at
        else:
            if depth == MAX_DEPTH + 1 and cut_at is not None:
                pieces += [text[kept_to:cut_at], "null"]
                kept_to, cut_at = found.end(), None
            depth -= 1
    if cut_at is not None:  # ends inside a cut value: not JSON, and kept short of the limit
        pieces += [text[kept_to:cut_at], "null"]
        kept_to = len(text)
    if not pieces:
        return text, False
    return "".join([*pieces, text[kept_to:]]), True


def _escaped(text: str, quote: int) -> bool:
    """Whether the quote at ``quote`` is escaped (an odd run of backslashes before it)."""
    start = quote
    while start > 0 and text[start - 1] == "\\":
        start -= 1
    return (quote - start) % 2 == 1


def _id_of(value: Any) -> str | int | None:
    """The id of a request (a JSON object with a method), if it has a valid one."""
    if not isinstance(value, dict) or "method" not in value:
        return None
    found = value.get("id")
    if isinstance(found, str) or (isinstance(found, int) and not isinstance(found, bool)):
        return found
    return None


def _problem(exc: ValidationError) -> str:
    """The first thing the parser or the schema refused, in a short line."""
    errors = exc.errors(include_url=False, include_input=False)
    if not errors:
        return "not a JSON-RPC message"
    first = errors[0]
    if first["type"] == "json_invalid":
        return f"not JSON: {first['msg']}"[:300]
    where = ".".join(str(p) for p in first["loc"][-2:])
    return f"{where}: {first['msg']}"[:300] if where else str(first["msg"])[:300]
