"""Bearer-token authentication of MCP over HTTP, on the SDK's own pieces.

Starlette's ``AuthenticationMiddleware`` runs :class:`TokenBackend`, which checks the
``Authorization: Bearer`` token against the lab (:func:`rsilab.mcp.tokens.check`) on every
HTTP request, so a revoked or expired token stops working at once, even inside an open
session. An accepted token becomes the SDK's ``AuthenticatedUser`` whose client id is the
token's record id: the SDK's session manager binds each session to that id, so no other
token can use it. The :class:`~rsilab.mcp.tokens.Grant` (campaign, role, actor) is kept in
the request's scope, where the tool handlers read it (:func:`grant_of`): nothing the client
sends names them. :class:`RecordRefusals` writes the refusal to the ledger (as few events as
:class:`~rsilab.mcp._http_refusals.RefusalLimiter` allows) and hands the request to the SDK's
``RequireAuthMiddleware``, which answers 401 with a ``WWW-Authenticate: Bearer`` header.

Why not the SDK's ``BearerAuthBackend`` with a ``TokenVerifier``: a verifier answers only
"valid or not", and the ledger must say why a request was refused (no token, an unknown, an
expired, a revoked one, one for another campaign) and whose token it was.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio.to_thread
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, RequireAuthMiddleware
from mcp.server.auth.provider import AccessToken
from starlette.authentication import AuthCredentials, AuthenticationBackend, BaseUser
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Receive, Scope, Send

from rsilab.mcp import tokens
from rsilab.mcp._http_refusals import RefusalLimiter
from rsilab.store.base import Store

log = logging.getLogger(__name__)

GRANT_KEY = "rsilab.grant"
"""Scope key of the request's :class:`~rsilab.mcp.tokens.Grant` (set only when accepted)."""
REFUSAL_KEY = "rsilab.refusal"
"""Scope key of why the request's token was refused."""
NAMED_SOURCES = 20
"""Sources named, with their counts, in the event written at shutdown."""


class TokenBackend(AuthenticationBackend):
    """Accepts a request whose bearer token :func:`rsilab.mcp.tokens.check` grants on
    ``campaign_id``; otherwise leaves it unauthenticated with the reason in its scope."""

    def __init__(self, store: Store, campaign_id: str) -> None:
        self._store = store
        self._campaign_id = campaign_id

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, BaseUser] | None:
        header = conn.headers.get("authorization", "")
        scheme, _, text = header.partition(" ")
        presented = text.strip() if scheme.lower() == "bearer" else None
        found = await anyio.to_thread.run_sync(
            tokens.check, self._store, presented, self._campaign_id
        )
        if isinstance(found, tokens.Refused):
            conn.scope[REFUSAL_KEY] = found
            return None
        conn.scope[GRANT_KEY] = found
        access = AccessToken(
            token=found.token_id,  # the id, not the secret: the SDK may log or keep this
            client_id=found.token_id,
            scopes=[str(found.role)],
            expires_at=int(found.expires_at.timestamp()),
            subject=found.actor,
        )
        return AuthCredentials(access.scopes), AuthenticatedUser(access)


class RecordRefusals:
    """ASGI middleware: a request left unauthenticated is recorded (within the limiter's
    allowance) and answered 401 by the SDK's ``RequireAuthMiddleware``; others pass on."""

    def __init__(
        self, app: ASGIApp, store: Store, campaign_id: str, limiter: RefusalLimiter
    ) -> None:
        self._gate = RequireAuthMiddleware(app, required_scopes=[])
        self._store = store
        self._campaign_id = campaign_id
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not isinstance(scope.get("user"), AuthenticatedUser):
            refused = scope.get(REFUSAL_KEY) or tokens.Refused(tokens.Refusal.MISSING)
            source = _source(scope)
            earlier = self.limiter.admit(source)
            if earlier is not None:
                note = f"{scope.get('method', '?')} from {source}"
                if earlier:
                    note += f"; {earlier} more refused from there without an event"
                try:
                    await anyio.to_thread.run_sync(
                        tokens.record_refusal, self._store, self._campaign_id, refused, note
                    )
                except Exception:  # the refusal stands even when the ledger cannot take it
                    log.exception("a refused MCP request could not be recorded")
        await self._gate(scope, receive, send)

    def record_unreported(self) -> None:
        """Write one event for the refusals counted but never recorded (at shutdown): how
        many, from how many sources, and the counts of the :data:`NAMED_SOURCES` largest."""
        counts = self.limiter.unreported()
        if not counts:
            return
        largest = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:NAMED_SOURCES]
        note = (
            f"{sum(counts.values())} refused requests from {len(counts)} sources recorded "
            f"only as counts: " + ", ".join(f"{source}: {n}" for source, n in largest)
        )
        refused = tokens.Refused(tokens.Refusal.COUNTED)
        tokens.record_refusal(self._store, self._campaign_id, refused, note)


def grant_of(request: Any) -> tokens.Grant:
    """The grant of the HTTP request a tool call came in (from :class:`TokenBackend`).

    Raises:
        PermissionError: the request carries none (it was not authenticated) -- which the
            middleware prevents, so this is a bug, refused rather than served.
    """
    scope = getattr(request, "scope", None)
    grant = scope.get(GRANT_KEY) if isinstance(scope, dict) else None
    if not isinstance(grant, tokens.Grant):
        raise PermissionError("an MCP request over HTTP reached a tool without a token's grant")
    return grant


def _source(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"
