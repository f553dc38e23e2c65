"""Only requests addressed to the dashboard by its own names: a defence against DNS rebinding.

A page at ``http://rebind.example:8765`` whose name an attacker re-points at 127.0.0.1 is, to
the browser, of the same origin as the dashboard: it could read a campaign page (and its form
token) and post guidance. What gives it away is the name it uses: its requests carry
``Host: rebind.example:8765``. :class:`LocalOnly` answers any request whose Host is not one of
the names the server is bound to (127.0.0.1, localhost, ::1, and an address the caller bound
explicitly) with 421 Misdirected Request, a request with no Host with 400, and a form post
whose ``Origin`` (or ``Referer``, when a client sends no Origin) is another site's with 403.
A client that sends neither (curl, scripts) is left to the form token.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
"""The names a dashboard on the loopback interface is reached by."""

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def host_name(authority: str) -> str | None:
    """The host name of a ``Host`` value or URL authority (``[::1]:8765`` -> ``::1``),
    lower-cased; None when it cannot be parsed."""
    try:
        name = urlsplit(f"//{authority}").hostname
    except ValueError:
        return None
    return name.lower() if name else None


class LocalOnly:
    """ASGI middleware: requests must name the server by one of ``names`` (see module)."""

    def __init__(self, app: ASGIApp, names: Iterable[str] = LOOPBACK_NAMES) -> None:
        self.app = app
        self.names = frozenset(n.lower().strip("[]") for n in names)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, text = refusal
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        body = (text + "\n").encode("utf-8")
        headers = [(b"content-type", b"text/plain; charset=utf-8")]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """The status and one-line reason to refuse ``scope`` with; None to serve it."""
        headers = _headers(scope)
        host = headers.get("host")
        if _count(scope, b"host") > 1:
            return 400, "refused: the request names more than one Host"
        if not host:
            return 400, "refused: the request names no Host; address the dashboard by its URL"
        name = host_name(host)
        if name not in self.names:
            return 421, (
                f"refused: this dashboard answers only to {', '.join(sorted(self.names))}, "
                f"not {host[:100]!r}; open it by the URL `rsilab ui` printed"
            )
        if scope["type"] != "http" or scope.get("method", "GET") in SAFE_METHODS:
            return None
        origin = headers.get("origin")
        source = origin if origin is not None else headers.get("referer")
        if source is None:
            return None  # not a browser: the form token decides
        parts = urlsplit(source) if source != "null" else None
        if parts is None or parts.scheme not in ("http", "https"):
            return 403, "refused: the form was sent from a page that is not this dashboard's"
        if host_name(parts.netloc) not in self.names or parts.netloc.lower() != host.lower():
            return 403, (
                f"refused: the form was sent from {parts.scheme}://{parts.netloc[:100]}, "
                "not from this dashboard; send it from the campaign's page"
            )
        return None


def _count(scope: Scope, name: bytes) -> int:
    return sum(1 for raw_name, _ in scope.get("headers", ()) if raw_name.lower() == name)


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name (the first of repeated ones)."""
    out: dict[str, str] = {}
    for raw_name, raw_value in scope.get("headers", ()):
        name = raw_name.decode("latin-1").lower()
        out.setdefault(name, raw_value.decode("latin-1"))
    return out
