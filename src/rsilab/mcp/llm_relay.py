"""The host end of ``--llm-endpoint``: a Unix socket per endpoint, relayed to HOST:PORT.

Each connection to an endpoint's socket (made by the relay inside the sandbox,
:mod:`rsilab.mcp.netrelay`) opens a TCP connection to that endpoint and nowhere else, and
copies bytes both ways untouched: for https, the TLS session is the agent's, end to end, and
this side never sees its plaintext. When a connection ends, ``on_close`` gets a
:class:`Connection` (bytes each way, how long, or why the endpoint was not reached) --
``rsilab agent`` records it in the ledger.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from rsilab.mcp.llm_endpoints import Endpoint
from rsilab.mcp.netrelay import splice

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 30.0
"""How long reaching an endpoint may take before the agent's connection is closed."""
SOCKET_MODE = 0o600
"""Only the socket's owner (the sandbox user) and root may connect."""
_POLL_S = 0.1  # how often a listener checks for shutdown: stopping 8 takes under a second


@dataclass(frozen=True)
class Connection:
    """One connection the agent made to an endpoint, once it has ended.

    Attributes:
        endpoint: where it went.
        sent: bytes from the agent to the endpoint.
        received: bytes from the endpoint to the agent.
        seconds: how long it was open (from the agent's connect).
        error: why the endpoint could not be reached; None when it was.
    """

    endpoint: Endpoint
    sent: int
    received: int
    seconds: float
    error: str | None = None


class _Server(socketserver.ThreadingUnixStreamServer):
    """One endpoint's socket; each connection in its own thread."""

    daemon_threads = False
    block_on_close = True  # server_close() waits for every connection (and its on_close)

    def __init__(self, path: Path, endpoint: Endpoint, on_close: Callable[[Connection], None]):
        self.endpoint = endpoint
        self.on_close = on_close
        self.live: set[socket.socket] = set()
        self.lock = threading.Lock()
        super().__init__(str(path), _Handler)

    def track(self, sock: socket.socket, live: bool) -> None:
        with self.lock:
            (self.live.add if live else self.live.discard)(sock)

    def cut(self) -> None:
        """End every open connection (both sides), so their threads finish."""
        with self.lock:
            for sock in self.live:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


class _Handler(socketserver.BaseRequestHandler):
    server: _Server
    request: socket.socket

    def handle(self) -> None:
        server, endpoint = self.server, self.server.endpoint
        started = time.monotonic()
        server.track(self.request, True)
        sent = received = 0
        error: str | None = None
        try:
            upstream = socket.create_connection(
                (endpoint.host, endpoint.port), timeout=CONNECT_TIMEOUT_S
            )
        except OSError as exc:
            error = str(exc.strerror or exc)
        else:
            with upstream:
                upstream.settimeout(None)
                server.track(upstream, True)
                try:
                    sent, received = splice(self.request, upstream)
                finally:
                    server.track(upstream, False)
        finally:
            server.track(self.request, False)
        done = Connection(endpoint, sent, received, time.monotonic() - started, error)
        try:
            server.on_close(done)
        except Exception:  # a record that fails must not take the relay down
            log.exception("could not record a connection to %s", endpoint)


@contextlib.contextmanager
def relay_endpoints(
    folder: Path,
    endpoints: Sequence[Endpoint],
    on_close: Callable[[Connection], None],
    owner: tuple[int, int] | None = None,
) -> Iterator[None]:
    """Serve a socket ``folder/<endpoint.socket_name>`` per endpoint while the block runs.

    The sockets are listening when the block is entered; they have mode :data:`SOCKET_MODE`
    and belong to ``owner`` (uid, gid) when given. On leaving, open connections are cut, each
    one's ``on_close`` has run, and the socket files are removed.
    """
    servers: list[_Server] = []
    threads: list[threading.Thread] = []
    try:
        for endpoint in endpoints:
            path = folder / endpoint.socket_name
            server = _Server(path, endpoint, on_close)
            servers.append(server)
            path.chmod(SOCKET_MODE)
            if owner is not None:
                os.chown(path, *owner)
            thread = threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": _POLL_S},
                name=f"llm-relay {endpoint}",
                daemon=True,
            )
            thread.start()
            threads.append(thread)
        yield
    finally:
        for server, thread in zip(servers, threads, strict=False):
            server.shutdown()
            thread.join()
        for server in servers:
            server.cut()
            server.server_close()
            Path(server.server_address).unlink(missing_ok=True)  # type: ignore[arg-type]
