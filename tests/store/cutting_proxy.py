"""A TCP proxy in front of the test server's unix socket that cuts one connection at a chosen
moment, as a network failure would: the store's client sees the connection die mid-commit."""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path


class CuttingProxy:
    """Forwards ``127.0.0.1:port`` to a PostgreSQL unix socket; :meth:`arm` picks the cut.

    Armed with ``marker``, the first client message holding those bytes ends its connection:
    with ``deliver`` the message reaches the server first (a COMMIT the server carries out,
    whose answer the client never gets: an ambiguous commit), without it the message is
    dropped (the server sees the client vanish mid-transaction and rolls back).

    :meth:`stall` makes the server a silent one, as a host whose network path went dead: the
    connections it forwards end, and new ones are accepted and never answered, so a client's
    connect waits for its whole timeout.
    """

    def __init__(self, socket_path: Path) -> None:
        self._target = str(socket_path)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._marker: bytes | None = None
        self._deliver = False
        self.cuts = 0
        self.accepted = 0  # connections a client opened through it
        self._stalled = False
        self._open: list[socket.socket] = []  # forwarded connections' sockets, ended on stall
        self._held: list[socket.socket] = []  # connections accepted while stalled
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, marker: bytes, *, deliver: bool) -> None:
        with self._lock:
            self._marker, self._deliver = marker, deliver

    def stall(self) -> None:
        """End every forwarded connection; later ones are accepted and never answered."""
        with self._lock:
            self._stalled = True
            held, self._open = self._open, []
        for sock in held:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.stall()
        self._listener.close()
        with self._lock:
            held, self._held = self._held, []
        for sock in held:
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.accepted += 1
                if self._stalled:
                    self._held.append(client)  # held open, never answered
                    continue
                self._open.append(client)
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.connect(self._target)
            with self._lock:
                self._open.append(server)
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _cut_here(self, data: bytes) -> bool | None:
        """None: forward; otherwise cut, after forwarding when True."""
        with self._lock:
            if self._marker is None or self._marker not in data:
                return None
            self._marker = None
            self.cuts += 1
            return self._deliver

    def _pump(self, src: socket.socket, dst: socket.socket, from_client: bool) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                cut = self._cut_here(data) if from_client else None
                if cut is None or cut:
                    dst.sendall(data)
                if cut is not None:
                    break
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
