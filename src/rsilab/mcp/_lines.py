"""One MCP session over a byte stream of JSON lines: the wire of stdio and of the Unix socket.

Both transports frame one JSON-RPC message per line, UTF-8, and share :func:`serve_stream`:
each line goes through :func:`rsilab.mcp.wire.read` (the one place client bytes become a
message), a refused one is recorded in the ledger (the session's
:data:`~rsilab.mcp.wire.RecordRefusal`) and answered with its JSON-RPC error, and the session
goes on with the next line. A line longer than :data:`~rsilab.mcp.wire.MAX_MESSAGE_BYTES` is
never held whole: its bytes are dropped as they come, and its end is recorded and answered
with the refusal.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
import mcp_types as types
from mcp.server import Server
from mcp.shared.message import SessionMessage

from rsilab.mcp.wire import MAX_MESSAGE_BYTES, RecordRefusal, Refusal, read, record, too_long

log = logging.getLogger(__name__)

_IN_THREAD_BYTES = 64 * 1024
"""Messages longer than this are read in a worker thread, not on the event loop."""

_GONE = (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


async def lines(stream: anyio.abc.ByteReceiveStream) -> AsyncIterator[bytes | Refusal]:
    """The non-blank lines of ``stream`` (without their newline), until it ends; a line over
    :data:`MAX_MESSAGE_BYTES` as its :class:`Refusal`, its bytes dropped unkept. A last line
    without a newline counts as a line."""
    held = bytearray()
    dropped = 0  # bytes of a too-long line seen so far; 0 while none is being dropped
    while True:
        try:
            chunk = await stream.receive()
        except _GONE:
            break
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            piece, start = chunk[start:end], end + 1
            if dropped:
                yield too_long(dropped + len(piece))
                dropped = 0
            else:
                held += piece
                if held.strip():
                    yield bytes(held)
                held.clear()
        if dropped:
            dropped += len(chunk) - start
        else:
            held += chunk[start:]
            if len(held) > MAX_MESSAGE_BYTES:
                dropped = len(held)
                held.clear()
    if dropped:
        yield too_long(dropped)
    elif held.strip():
        yield bytes(held)


async def _read(line: bytes) -> types.JSONRPCMessage | Refusal:
    if len(line) > _IN_THREAD_BYTES:  # a pass over megabytes must not stall other sessions
        return await anyio.to_thread.run_sync(read, line)
    return read(line)


async def serve_stream(
    server: Server[Any], stream: anyio.abc.ByteStream, recorder: RecordRefusal
) -> None:
    """Serve one MCP session on ``stream`` until the client closes its side; closes
    ``stream``. Every line is answered: by the session, or with the JSON-RPC error of its
    :class:`Refusal`, after ``recorder`` was given the refusal's problem (a line too long
    to hold included). The next line is read only once a refusal is recorded, so a flood
    of bad lines is slowed to the ledger's pace, not queued; a recorder that fails is
    logged and the session goes on."""
    incoming_send, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outgoing, outgoing_receive = anyio.create_memory_object_stream[SessionMessage](0)
    refusals = outgoing.clone()  # the reader answers refused lines on the session's own wire

    async def receive() -> None:
        async with incoming_send, refusals:
            async for line in lines(stream):
                message = line if isinstance(line, Refusal) else await _read(line)
                if isinstance(message, Refusal):
                    log.info("refused an MCP message: %s", message.problem)
                    await record(recorder, message)
                    await refusals.send(SessionMessage(message.response()))
                else:
                    await incoming_send.send(SessionMessage(message))

    async def write() -> None:
        async with outgoing_receive:
            async for sent in outgoing_receive:
                data = sent.message.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    await stream.send(data.encode() + b"\n")
                except _GONE:
                    continue  # the client is gone; keep draining so the session can end

    async with stream, anyio.create_task_group() as group:
        group.start_soon(receive)
        group.start_soon(write)
        await server.run(incoming, outgoing, server.create_initialization_options())
        group.cancel_scope.cancel()


class FdStream(anyio.abc.ByteStream):
    """A byte stream over two file descriptors (stdio's wire), read and written in worker
    threads. Closing it closes neither descriptor: their owner does."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._read_fd = read_fd
        self._write_fd = write_fd

    async def receive(self, max_bytes: int = 65536) -> bytes:
        data = await anyio.to_thread.run_sync(os.read, self._read_fd, max_bytes)
        if not data:
            raise anyio.EndOfStream
        return data

    async def send(self, item: bytes) -> None:
        await anyio.to_thread.run_sync(self._write_all, item)

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._write_fd, view) :]

    async def send_eof(self) -> None:
        """Nothing to do: the write side ends when its owner closes it."""

    async def aclose(self) -> None:
        """Nothing to close: the descriptors belong to the caller."""
