"""The two relays of ``--llm-endpoint``, on real sockets outside the sandbox: the host's
(Unix socket -> TCP endpoint) and the one that runs inside (loopback TCP -> Unix socket).
The whole path through bubblewrap is tested in tests/cli/test_agent.py."""

from __future__ import annotations

import socket
import socketserver
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rsilab.mcp import netrelay
from rsilab.mcp.llm_endpoints import Endpoint
from rsilab.mcp.llm_relay import Connection, relay_endpoints


class _Echo(socketserver.BaseRequestHandler):
    """Sends back what it reads, until the client half-closes."""

    request: socket.socket

    def handle(self) -> None:
        while chunk := self.request.recv(1 << 16):
            self.request.sendall(chunk)


@pytest.fixture
def echo_port() -> Iterator[int]:
    """An echo server on the host's 127.0.0.1."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def free_port() -> int:
    """A port nothing listens on (bound, then let go)."""
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port: int = probe.getsockname()[1]
    return port


def exchange(sock: socket.socket, data: bytes) -> bytes:
    """Send ``data``, half-close, and read until the other side closes."""
    sock.sendall(data)
    sock.shutdown(socket.SHUT_WR)
    received = b""
    while chunk := sock.recv(1 << 16):
        received += chunk
    return received


def unix_connect(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(path))
    return sock


def test_the_host_relays_each_connection_and_reports_it(tmp_path: Path, echo_port: int) -> None:
    endpoint = Endpoint("127.0.0.1", echo_port)
    ended: list[Connection] = []
    path = tmp_path / endpoint.socket_name
    with relay_endpoints(tmp_path, [endpoint], ended.append):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600  # owner only
        for data in (b"hello", b"x" * 300_000):
            with unix_connect(path) as sock:
                assert exchange(sock, data) == data
    assert not path.exists()
    assert sorted((c.endpoint, c.sent, c.received, c.error) for c in ended) == [
        (endpoint, 5, 5, None),
        (endpoint, 300_000, 300_000, None),
    ]
    assert all(c.seconds >= 0 for c in ended)


def test_an_endpoint_that_cannot_be_reached_is_reported(tmp_path: Path) -> None:
    endpoint = Endpoint("127.0.0.1", free_port())
    ended: list[Connection] = []
    with (
        relay_endpoints(tmp_path, [endpoint], ended.append),
        unix_connect(tmp_path / endpoint.socket_name) as sock,
    ):
        assert sock.recv(10) == b""  # closed: nothing to relay to
    assert [(c.sent, c.received) for c in ended] == [(0, 0)]
    assert ended[0].error is not None and "refused" in ended[0].error.lower()


def test_connections_still_open_are_cut_when_the_relay_stops(
    tmp_path: Path, echo_port: int
) -> None:
    endpoint = Endpoint("localhost", echo_port)
    ended: list[Connection] = []
    with relay_endpoints(tmp_path, [endpoint], ended.append):
        sock = unix_connect(tmp_path / endpoint.socket_name)
        sock.sendall(b"ping")
        assert sock.recv(4) == b"ping"  # relayed, and left open
    with sock:
        assert sock.recv(4) == b""
    assert [(c.sent, c.received, c.error) for c in ended] == [(4, 4, None)]


def test_the_inside_relay_joins_loopback_to_the_hosts_socket(
    tmp_path: Path, echo_port: int
) -> None:
    endpoint = Endpoint("127.0.0.1", echo_port)
    port = free_port()
    config = [{"listen": ["127.0.0.1", "::1"], "port": port, "socket": ""}]
    ended: list[Connection] = []
    with relay_endpoints(tmp_path, [endpoint], ended.append):
        config[0]["socket"] = str(tmp_path / endpoint.socket_name)
        bound = netrelay.bind_all(config)
        assert {path for _, path in bound} == {config[0]["socket"]}
        for listener, path in bound:
            threading.Thread(target=netrelay._serve, args=(listener, path), daemon=True).start()
        try:
            with socket.create_connection(("127.0.0.1", port)) as sock:
                assert exchange(sock, b"through both relays") == b"through both relays"
        finally:
            for listener, _ in bound:
                listener.shutdown(socket.SHUT_RDWR)  # wakes accept(): the serving thread ends
                listener.close()
    assert [(c.sent, c.received) for c in ended] == [(19, 19)]


def test_the_inside_relay_refuses_to_start_without_its_first_address(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        config: list[dict[str, object]] = [{"listen": ["127.0.0.1"], "port": port, "socket": "s"}]
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}"):
            netrelay.bind_all(config)
        status = netrelay.main(["rsilab-net", str(tmp_path / "missing.json"), "--", "true"])
        assert status == netrelay.EXIT_CANNOT_RELAY
    assert netrelay.main(["rsilab-net", "only-config"]) == 2
