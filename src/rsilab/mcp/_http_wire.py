"""Request bodies the MCP SDK cannot read, made into requests it answers, over HTTP.

The stdio and socket transports pass each line through :func:`rsilab.mcp.wire.repair`, so a
``tools/call`` whose arguments nest too deeply for the SDK's parser still reaches the
dispatcher and the ledger, and a request with unreadable ``params`` gets a JSON-RPC error.
Over streamable HTTP a message is a POST body: :class:`RepairedBodies` reads the whole body
(up to the SDK's own size limit) and hands the repaired one on. A body over the limit is
passed on as it came, for the SDK to refuse (413).
"""

from __future__ import annotations

from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rsilab.mcp.wire import repair


class RepairedBodies:
    """ASGI middleware: each POST's body passed through :func:`rsilab.mcp.wire.repair`."""

    def __init__(self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_REQUEST_BODY_SIZE) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        read: list[Message] = []
        size, complete = 0, False
        while not complete and size <= self.max_bytes:
            message = await receive()
            read.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            complete = not message.get("more_body", False)
        if complete and size <= self.max_bytes:
            body = b"".join(m.get("body", b"") for m in read)
            fixed = repair(body) if body.strip() else body
            if fixed is not body:
                data = fixed.encode() if isinstance(fixed, str) else fixed
                scope = {**scope, "headers": _with_length(scope, len(data))}
                read = [{"type": "http.request", "body": data, "more_body": False}]
        await self.app(scope, _replay(read, receive), send)


def _with_length(scope: Scope, length: int) -> list[tuple[bytes, bytes]]:
    kept = [(k, v) for k, v in scope.get("headers", ()) if k.lower() != b"content-length"]
    return [*kept, (b"content-length", str(length).encode())]


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """``receive`` that first gives back ``messages``."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
