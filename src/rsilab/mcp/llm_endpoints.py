"""``--llm-endpoint HOST:PORT``: which endpoints an agent in the sandbox may reach, and how
each appears inside.

An endpoint is served inside the sandbox's network namespace (loopback only) by the relay of
:mod:`rsilab.mcp.netrelay`, at an address the agent's own configuration already names:

- a host name maps, in the sandbox's ``/etc/hosts``, to an address of its own in 127.77.0.0/24
  (two endpoints on port 443 of two hosts must not collide), so ``https://HOST:PORT/...``
  resolves to the relay and TLS, with its SNI and certificate checks, stays end to end;
- ``localhost`` is served on 127.0.0.1 (and ::1, where the namespace has IPv6);
- a loopback address (127.0.0.0/8, ::1) is served on itself.

Other IP addresses are refused: the namespace has no route to them, so the agent could not
connect, and no name can stand in for them there.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from urllib.parse import urlsplit

from rsilab.errors import UserError

MAX_ENDPOINTS = 8
"""The most ``--llm-endpoint`` options one agent may have."""
NAME_NET = "127.77.0."
"""Host names get addresses ``NAME_NET + n`` (n from 1) inside the sandbox."""
BASE_HOSTS = "127.0.0.1 localhost\n::1 localhost\n"
"""What the sandbox's own ``/etc/hosts`` holds (see :mod:`rsilab.sandbox._bwrap_args`)."""

_LABEL = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?\Z")
_HINT = "give HOST:PORT, e.g. --llm-endpoint api.openai.com:443 or --llm-endpoint localhost:8000"


@dataclass(frozen=True)
class Endpoint:
    """One endpoint: a lower-cased host name or a loopback IP address (IPv6 without
    brackets), and a port."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def socket_name(self) -> str:
        """The file name of its Unix socket (in ``/rsilab/net``)."""
        return f"{self.host.replace(':', '_')}_{self.port}.sock"

    @property
    def is_name(self) -> bool:
        """Whether ``host`` is a name the sandbox's ``/etc/hosts`` must map."""
        return self.host != "localhost" and not _is_ip(self.host)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _url_hint(text: str) -> str:
    parts = urlsplit(text if "://" in text else f"//{text}")
    try:
        port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    except ValueError:
        port = None
    if parts.hostname and port:
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        return f"give HOST:PORT, here --llm-endpoint {host}:{port}"
    return _HINT


def parse_endpoint(text: str) -> Endpoint:
    """``HOST:PORT`` (``[IPv6]:PORT``) as an :class:`Endpoint`.

    Raises:
        UserError: a URL, no port, a port outside 1..65535, a malformed host name, or an IP
            address that is not loopback.
    """
    given = f"--llm-endpoint {text!r}"
    if "/" in text or "@" in text:
        raise UserError(f"{given} is a URL, not a HOST:PORT", _url_hint(text))
    host, sep, port_text = text.rpartition(":")
    if not sep or not host:
        raise UserError(f"{given} has no port", _HINT)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise UserError(f"{given}: an IPv6 address goes in brackets", "e.g. [::1]:8000")
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise UserError(f"{given}: the port must be a number from 1 to 65535", _HINT)
    host = host.lower()
    if _is_ip(host):
        address = ipaddress.ip_address(host)
        if not address.is_loopback:
            raise UserError(
                f"{given}: the sandbox has no route to {host}, so the agent could not reach it "
                "there; only loopback addresses and host names can be served inside",
                "give the endpoint's host name (add one to this machine's /etc/hosts if it has "
                "none), and point the agent at that name",
            )
        host = str(address)
    elif len(host) > 253 or not all(_LABEL.match(label) for label in host.split(".")):
        raise UserError(f"{given}: {host!r} is not a host name", _HINT)
    return Endpoint(host, int(port_text))


@dataclass(frozen=True)
class Served:
    """An endpoint and where the relay inside the sandbox listens for it."""

    endpoint: Endpoint
    addresses: tuple[str, ...]
    """Loopback addresses in the sandbox; the first must bind, the others may fail."""


def plan(texts: Sequence[str]) -> tuple[Served, ...]:
    """Parse and check every ``--llm-endpoint``, and place each inside the sandbox.

    Raises:
        UserError: a bad endpoint (:func:`parse_endpoint`), more than :data:`MAX_ENDPOINTS`,
            or two that would be served at the same address and port.
    """
    if len(texts) > MAX_ENDPOINTS:
        raise UserError(
            f"{len(texts)} --llm-endpoint options given; at most {MAX_ENDPOINTS} are allowed",
            "give only the endpoints the agent's LLM client uses",
        )
    names: dict[str, str] = {}
    served: list[Served] = []
    taken: dict[tuple[str, int], Endpoint] = {}
    for text in texts:
        endpoint = parse_endpoint(text)
        if endpoint.host == "localhost":
            addresses: tuple[str, ...] = ("127.0.0.1", "::1")
        elif endpoint.is_name:
            address = names.setdefault(endpoint.host, f"{NAME_NET}{len(names) + 1}")
            addresses = (address,)
        else:
            addresses = (endpoint.host,)
        for address in addresses:
            other = taken.setdefault((address, endpoint.port), endpoint)
            if other is not endpoint:
                raise UserError(
                    f"--llm-endpoint {endpoint} and {other} would both be served at "
                    f"{address}:{endpoint.port} inside the sandbox",
                    "give each endpoint once",
                )
        served.append(Served(endpoint, addresses))
    return tuple(served)


def hosts_file(served: Sequence[Served]) -> str:
    """The sandbox's ``/etc/hosts``: its own lines, and each host name at its relay."""
    lines = [f"{s.addresses[0]} {s.endpoint.host}\n" for s in served if s.endpoint.is_name]
    return BASE_HOSTS + "".join(dict.fromkeys(lines))


def relay_config(served: Sequence[Served], net: PurePosixPath) -> list[dict[str, object]]:
    """The CONFIG :mod:`rsilab.mcp.netrelay` reads; sockets are under ``net`` (inside)."""
    return [
        {
            "endpoint": str(s.endpoint),
            "listen": list(s.addresses),
            "port": s.endpoint.port,
            "socket": str(net / s.endpoint.socket_name),
        }
        for s in served
    ]
