"""Request bodies read at the wire over HTTP, as lines are over stdio and the Unix socket.

Over streamable HTTP a message is a POST body. :class:`CheckedBodies` reads each body (never
holding more than :data:`~rsilab.mcp.wire.MAX_MESSAGE_BYTES` of it) and passes it through
:func:`rsilab.mcp.wire.read`: a body it refuses -- too long, too deep, not UTF-8, not JSON,
not a JSON-RPC message -- is recorded in the ledger and answered here with HTTP 400 and the
JSON-RPC error (carrying the request's id when one could be read); any other goes on to the
SDK unchanged. It sits behind the Host and token checks, so only an authenticated client is
answered at all, and its refusal is recorded under the token's grant (its actor, role and
campaign: ``ExperimentOS.refused_message``), which the token check put in the request's scope
from the headers, before a byte of the body was read.
"""

from __future__ import annotations

import logging
from functools import partial

import anyio.to_thread
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rsilab.expos import CallContext, ExperimentOS
from rsilab.mcp import tokens
from rsilab.mcp._http_auth import GRANT_KEY
from rsilab.mcp.wire import MAX_MESSAGE_BYTES, Refusal, read, record, too_long

log = logging.getLogger(__name__)


class CheckedBodies:
    """ASGI middleware: each POST's body read by :func:`rsilab.mcp.wire.read` first; a
    refused one recorded through ``expos`` under the request's grant, then answered."""

    def __init__(self, app: ASGIApp, expos: ExperimentOS) -> None:
        self.app = app
        self._expos = expos

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size, more = 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left before its body was whole: no one to answer
            size += len(message.get("body", b""))
            if size <= MAX_MESSAGE_BYTES:
                chunks.append(message.get("body", b""))
            more = bool(message.get("more_body", False))
        body = b"".join(chunks)
        checked = (
            too_long(size)
            if size > MAX_MESSAGE_BYTES
            else await anyio.to_thread.run_sync(read, body)  # one pass, off the event loop
        )
        if isinstance(checked, Refusal):
            log.info("refused an MCP request body: %s", checked.problem)
            grant = scope.get(GRANT_KEY)
            if isinstance(grant, tokens.Grant):
                ctx = CallContext(grant.actor, grant.role, grant.campaign_id)
                await record(partial(self._expos.refused_message, ctx), checked)
            else:  # the token check stops such a request first: a bug, logged; still refused
                log.error("an MCP request body was refused without a token's grant to record")
            await _answer(send, checked)
            return
        await self.app(scope, _replay(body, receive), send)


async def _answer(send: Send, refusal: Refusal) -> None:
    data = refusal.to_json()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def _replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` that first gives back the whole ``body``, then what the client sends."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
