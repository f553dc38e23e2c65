"""The Experiment OS over MCP on a Unix socket: one MCP session per connection.

``rsilab agent`` serves this on the host and binds the socket into the sandbox, where the
bridge (:mod:`rsilab.mcp.bridge`) joins it to the agent's MCP client. The wire is the stdio
transport's: one JSON-RPC message per line, UTF-8. Each connection is one session of a fresh
server from the ``make_server`` the endpoint was started with -- for ``rsilab agent``,
:func:`rsilab.mcp.server.build_server` with a call context (role, campaign, workspace) the host
fixed, which nothing a client sends can change. So every call goes through
``ExperimentOS.call`` (role check, validation, guards, ledger event) exactly as over stdio;
only the transport differs.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.from_thread
import mcp_types as types
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.server import Server
from mcp.shared.message import SessionMessage

from rsilab.mcp.wire import repair

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""The longest line one message may take; a longer one ends the connection."""

SOCKET_MODE = 0o600
"""The socket's mode: only its owner (``serve_socket``'s ``owner``) and root may connect."""


async def serve_stream(server: Server[Any], stream: anyio.abc.ByteStream) -> None:
    """Serve one MCP session on ``stream`` until the client closes its side (or the line
    framing breaks); closes ``stream``. Mirrors the SDK's ``stdio_server``: a line that is not
    a JSON-RPC message is handed to the session as an exception, which answers it."""
    incoming_send, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outgoing, outgoing_receive = anyio.create_memory_object_stream[SessionMessage](0)
    lines = BufferedByteReceiveStream(stream)

    async def read() -> None:
        async with incoming_send:
            while True:
                try:
                    line = await lines.receive_until(b"\n", MAX_MESSAGE_BYTES)
                except (anyio.IncompleteRead, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return  # the client left
                except anyio.DelimiterNotFound:
                    log.warning("an MCP message over %s bytes; closing", MAX_MESSAGE_BYTES)
                    return
                if not line.strip():
                    continue
                try:
                    message = types.jsonrpc_message_adapter.validate_json(
                        repair(line), by_name=False
                    )
                except Exception as exc:  # the session reports a bad message to the client
                    await incoming_send.send(exc)
                    continue
                await incoming_send.send(SessionMessage(message))

    async def write() -> None:
        async with outgoing_receive:
            async for sent in outgoing_receive:
                data = sent.message.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    await stream.send(data.encode() + b"\n")
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    continue  # the client is gone; keep draining so the session can end

    async with stream, anyio.create_task_group() as group:
        group.start_soon(read)
        group.start_soon(write)
        await server.run(incoming, outgoing, server.create_initialization_options())
        group.cancel_scope.cancel()


async def serve_socket(
    path: Path,
    make_server: Callable[[], Server[Any]],
    *,
    owner: tuple[int, int] | None = None,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on ``path`` and serve each connection as its own session of a fresh
    ``make_server()``, until cancelled. Reports started once listening.

    The socket has mode :data:`SOCKET_MODE` and belongs to ``owner`` (uid, gid) when given
    -- the sandbox user, when rsilab runs as root -- so no other user of the host can connect
    and act in the agent's place. A session that fails is logged and closed; the others and
    the listener go on.
    """

    async def handle(stream: anyio.abc.SocketStream) -> None:
        try:
            await serve_stream(make_server(), stream)
        except Exception:
            log.exception("an MCP session on %s failed", path)

    listener = await anyio.create_unix_listener(path, mode=SOCKET_MODE)
    async with listener:
        if owner is not None:
            os.chown(path, *owner)
        task_status.started()
        await listener.serve(handle)


@contextlib.contextmanager
def socket_endpoint(
    path: Path, make_server: Callable[[], Server[Any]], owner: tuple[int, int] | None = None
) -> Iterator[Path]:
    """Serve :func:`serve_socket` on ``path`` (for ``owner``) from a background thread while
    the block runs.

    Listening has begun when the block is entered. On leaving, the listener and open sessions
    are cancelled; a tool call in progress is not abandoned but finishes (and records its
    event) first. The socket file is removed.
    """
    with anyio.from_thread.start_blocking_portal() as portal:
        future, _ = portal.start_task(partial(serve_socket, owner=owner), path, make_server)
        try:
            yield path
        finally:
            future.cancel()
    path.unlink(missing_ok=True)
