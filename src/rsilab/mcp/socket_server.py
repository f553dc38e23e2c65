"""The Experiment OS over MCP on a Unix socket: one MCP session per connection.

``rsilab agent`` serves this on the host and binds the socket into the sandbox, where the
bridge (:mod:`rsilab.mcp.bridge`) joins it to the agent's MCP client. The wire is the stdio
transport's (:func:`rsilab.mcp._lines.serve_stream`): one JSON-RPC message per line, UTF-8,
each read by :func:`rsilab.mcp.wire.read`, a refused one recorded in the ledger (the
endpoint's recorder: ``ExperimentOS.refused_message`` with the host's call context) and
answered with a JSON-RPC error.
Each connection is one session of a fresh server from the ``make_server`` the endpoint was
started with -- for ``rsilab agent``, :func:`rsilab.mcp.server.build_server` with a call
context (role, campaign, workspace) the host fixed, which nothing a client sends can change.
So every call goes through ``ExperimentOS.call`` (role check, validation, guards, ledger
event) exactly as over stdio; only the transport differs.
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
from mcp.server import Server

from rsilab.mcp._lines import serve_stream
from rsilab.mcp.wire import RecordRefusal

log = logging.getLogger(__name__)

SOCKET_MODE = 0o600
"""The socket's mode: only its owner (``serve_socket``'s ``owner``) and root may connect."""


async def serve_socket(
    path: Path,
    make_server: Callable[[], Server[Any]],
    recorder: RecordRefusal,
    *,
    owner: tuple[int, int] | None = None,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on ``path`` and serve each connection as its own session of a fresh
    ``make_server()``, until cancelled; ``recorder`` writes each message the wire refuses
    on any of them to the ledger. Reports started once listening.

    The socket has mode :data:`SOCKET_MODE` and belongs to ``owner`` (uid, gid) when given
    -- the sandbox user, when rsilab runs as root -- so no other user of the host can connect
    and act in the agent's place. A session that fails is logged and closed; the others and
    the listener go on.
    """

    async def handle(stream: anyio.abc.SocketStream) -> None:
        try:
            await serve_stream(make_server(), stream, recorder)
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
    path: Path,
    make_server: Callable[[], Server[Any]],
    recorder: RecordRefusal,
    owner: tuple[int, int] | None = None,
) -> Iterator[Path]:
    """Serve :func:`serve_socket` on ``path`` (for ``owner``, refusals to ``recorder``) from a
    background thread while the block runs.

    Listening has begun when the block is entered. On leaving, the listener and open sessions
    are cancelled; a tool call in progress is not abandoned but finishes (and records its
    event) first. The socket file is removed.
    """
    with anyio.from_thread.start_blocking_portal() as portal:
        serve = partial(serve_socket, owner=owner)
        future, _ = portal.start_task(serve, path, make_server, recorder)
        try:
            yield path
        finally:
            future.cancel()
    path.unlink(missing_ok=True)
