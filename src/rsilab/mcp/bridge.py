#!/usr/bin/env python3
"""rsilab-mcp: the MCP server command an agent inside the sandbox starts (stdio <-> socket).

``rsilab agent`` ships this file into the sandbox read-only, at ``/rsilab/bin/rsilab-mcp``. The
agent's MCP client starts it like any stdio MCP server; it connects to the Unix socket that
``rsilab agent`` serves the Experiment OS on (``/rsilab/mcp.sock``) and copies bytes both ways:
the client's JSON-RPC lines on stdin go to the socket, the server's answers come back on
stdout. It adds nothing and checks nothing: role, campaign and workspace are fixed on the host
side, per socket, so what the client sends cannot change them.

It runs on the sandbox's Python (the runtime venv), where rsilab is not installed: standard
library only, no import of rsilab. Exit status: 0 when either side closes, 1 when the socket
cannot be reached (the reason on stderr).

Usage: ``rsilab-mcp [SOCKET]``; SOCKET defaults to ``$RSILAB_MCP_SOCKET``, else
``/rsilab/mcp.sock``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading

DEFAULT_SOCKET = "/rsilab/mcp.sock"
_CHUNK = 1 << 16


def socket_path(argv: list[str], environ: dict[str, str]) -> str:
    """The socket to reach: the first argument, else ``$RSILAB_MCP_SOCKET``, else the default."""
    if len(argv) > 1:
        return argv[1]
    return environ.get("RSILAB_MCP_SOCKET") or DEFAULT_SOCKET


def _stdin_to_socket(conn: socket.socket, stdin_fd: int) -> None:
    """Copy stdin to the socket; at end of input, half-close so the server sees the client leave."""
    with contextlib.suppress(OSError):  # the socket closed under us: the other pump ends it
        while True:
            chunk = os.read(stdin_fd, _CHUNK)
            if not chunk:
                break
            conn.sendall(chunk)
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_WR)


def pump(conn: socket.socket, stdin_fd: int, stdout_fd: int) -> None:
    """Copy both ways until the server closes the connection (or stdout goes away).

    The stdin side runs in a daemon thread: a client that keeps its end open after the server
    has left must not hold the bridge up.
    """
    threading.Thread(target=_stdin_to_socket, args=(conn, stdin_fd), daemon=True).start()
    while True:
        try:
            chunk = conn.recv(_CHUNK)
        except OSError:
            return
        if not chunk:
            return
        view = memoryview(chunk)
        while view:
            try:
                written = os.write(stdout_fd, view)
            except OSError:
                return  # the client stopped reading: nothing left to deliver to
            view = view[written:]


def main(argv: list[str]) -> int:
    """Connect and copy; 0 when a side closes, 1 when the socket cannot be reached."""
    path = socket_path(argv, dict(os.environ))
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except OSError as exc:
        print(
            f"rsilab-mcp: cannot reach the rsilab MCP socket at {path}: {exc.strerror or exc}; "
            "it exists only inside `rsilab agent`",
            file=sys.stderr,
        )
        return 1
    with conn:
        pump(conn, sys.stdin.fileno(), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
