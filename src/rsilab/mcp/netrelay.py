#!/usr/bin/env python3
"""rsilab-net: inside the sandbox, serve each LLM endpoint on loopback, then exec CMD.

``rsilab agent --llm-endpoint HOST:PORT`` ships this file into the sandbox read-only, at
``/rsilab/bin/rsilab-net``, and runs CMD as ``rsilab-net CONFIG -- CMD ARGS...``. CONFIG (JSON)
lists, per endpoint, the loopback addresses and port to listen on and the Unix socket (under
``/rsilab/net``) that the host relays to HOST:PORT. This program

1. binds every listener (so none is missing when CMD starts; a failure ends it with status
   :data:`EXIT_CANNOT_RELAY` and the reason on stderr, before CMD runs),
2. forks: the child serves the listeners, copying each accepted connection's bytes to and from
   a new connection to the endpoint's socket; it adds nothing and reads nothing (TLS stays end
   to end),
3. execs CMD in the parent, so CMD keeps this process (and its exit status is the sandbox's).
   When CMD ends, the sandbox's pid namespace ends, and the relay child with it.

It runs on the sandbox's Python (the runtime venv), where rsilab is not installed: standard
library only, no import of rsilab. The host side imports :func:`splice` from here, so both
ends copy bytes the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
from collections.abc import Sequence

EXIT_CANNOT_RELAY = 126
"""Exit status when a listener cannot be bound (CMD was not started)."""
EXIT_NOT_FOUND = 127
"""Exit status when CMD cannot be executed, as a shell gives."""
_CHUNK = 1 << 16
_BACKLOG = 64


def _copy(src: socket.socket, dst: socket.socket, counts: list[int], index: int) -> None:
    """Copy ``src`` to ``dst`` until ``src`` ends, then half-close ``dst``; on a broken
    socket, end both directions (the other copy wakes up and stops)."""
    try:
        while True:
            chunk = src.recv(_CHUNK)
            if not chunk:
                break
            dst.sendall(chunk)
            counts[index] += len(chunk)
    except OSError:
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        return
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


def splice(a: socket.socket, b: socket.socket) -> tuple[int, int]:
    """Copy bytes both ways between connected sockets ``a`` and ``b`` until both directions
    have ended; returns (bytes a->b, bytes b->a). An end of input is passed on as a half-close,
    so request/response protocols finish cleanly. Closes neither socket."""
    counts = [0, 0]
    back = threading.Thread(target=_copy, args=(b, a, counts, 1), daemon=True)
    back.start()
    _copy(a, b, counts, 0)
    back.join()
    return counts[0], counts[1]


def _relay(client: socket.socket, path: str) -> None:
    with client:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with upstream:
            try:
                upstream.connect(path)
            except OSError as exc:
                print(f"rsilab-net: cannot reach {path}: {exc.strerror or exc}", file=sys.stderr)
                return
            splice(client, upstream)


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_relay, args=(client, path), daemon=True).start()


def bind_all(relays: Sequence[dict[str, object]]) -> list[tuple[socket.socket, str]]:
    """Listen on every address and port of ``relays`` (entries of CONFIG: ``listen``, a list
    of addresses whose first must bind and the rest may fail, e.g. ``::1`` where the namespace
    has no IPv6; ``port``; ``socket``). Returns (listener, socket path) pairs.

    Raises:
        OSError: a required address cannot be bound (the message names it).
    """
    bound: list[tuple[socket.socket, str]] = []
    for relay in relays:
        addresses, port, path = relay["listen"], relay["port"], relay["socket"]
        assert isinstance(addresses, list) and isinstance(port, int) and isinstance(path, str)
        for position, address in enumerate(addresses):
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            listener = socket.socket(family, socket.SOCK_STREAM)
            try:
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                listener.bind((address, port))
                listener.listen(_BACKLOG)
            except OSError as exc:
                listener.close()
                if position == 0:
                    message = f"cannot listen on {address}:{port}: {exc.strerror}"
                    raise OSError(exc.errno, message) from None
                continue
            bound.append((listener, path))
    return bound


def main(argv: list[str]) -> int:
    """Bind, fork the relay, exec CMD; returns only when CMD could not be started."""
    if len(argv) < 4 or argv[2] != "--":
        print("usage: rsilab-net CONFIG -- CMD [ARGS...]", file=sys.stderr)
        return 2
    config, command = argv[1], argv[3:]
    try:
        with open(config) as handle:
            relays = json.load(handle)
        bound = bind_all(relays)
    except (OSError, ValueError) as exc:
        print(f"rsilab-net: {exc}; the agent was not started", file=sys.stderr)
        return EXIT_CANNOT_RELAY
    sys.stdout.flush()
    sys.stderr.flush()
    if os.fork() == 0:  # the relay: serves until the sandbox ends
        try:
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 0)
            os.dup2(devnull, 1)  # keep stderr for the relay's complaints
            threads = [threading.Thread(target=_serve, args=pair, daemon=True) for pair in bound]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            os._exit(0)
    for listener, _ in bound:  # the relay holds them; CMD must not inherit them
        listener.close()
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"rsilab-net: cannot run {command[0]}: {exc.strerror or exc}", file=sys.stderr)
    return EXIT_NOT_FOUND


if __name__ == "__main__":
    sys.exit(main(sys.argv))
