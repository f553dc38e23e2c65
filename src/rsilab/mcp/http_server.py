"""The Experiment OS over MCP's streamable HTTP transport, for agents on other machines.

``rsilab mcp --http HOST:PORT --campaign C`` serves one campaign at ``http://HOST:PORT/mcp``
with the SDK's own ``StreamableHTTPSessionManager`` (stateful sessions), behind four checks,
outermost first:

1. **Host and Origin** (:class:`McpHosts`, the dashboard's rule from
   :mod:`rsilab.web._hosts`): a request must name the server by an address it is bound to
   (or a ``--host-name`` a reverse proxy forwards), else 421; a browser request from another
   site's page is refused with 403. This defeats DNS rebinding.
2. **Bearer token** (:mod:`rsilab.mcp._http_auth`): every HTTP request carries a token issued
   with ``rsilab token new``; it names the campaign, the role and the actor, and nothing the
   request says can change them. A request without a valid token gets 401 and, within a
   rate limit, a protocol flag in the ledger.
3. **The wire** (:mod:`rsilab.mcp._http_wire`): a body over 8 MiB, too deep, not UTF-8 or
   not JSON-RPC is answered 400 with a JSON-RPC error and recorded (a denied event and a
   protocol flag) under the token's actor and role.
4. **The dispatcher**: every tool call goes through ``ExperimentOS.call`` exactly as over
   stdio (role check, validation, guards, one ledger event), with the token's role and actor.

Each actor works in its own folder on this machine, ``LAB/workspaces/<campaign>/<actor>``
(as ``rsilab agent`` uses), made on its first call; tool paths are relative to it.

Plain HTTP carries the tokens in clear text: the server binds to loopback by default, and
binding another address needs ``allow_remote`` and prints a warning to put TLS in a reverse
proxy in front (docs/remote-agents.md).
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import signal
import socket
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import anyio.to_thread
import mcp_types as types
import uvicorn
from mcp.server import Server, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import Route

from rsilab.errors import UserError
from rsilab.expos import CallContext, ExperimentOS, ToolResult, default_registry, find_campaign
from rsilab.expos.services import LabServices
from rsilab.mcp import tokens
from rsilab.mcp._http_auth import RecordRefusals, TokenBackend, grant_of
from rsilab.mcp._http_refusals import RefusalLimiter
from rsilab.mcp._http_wire import CheckedBodies
from rsilab.mcp.server import (
    _RAW_ARGUMENTS,
    SERVER_NAME,
    _keep_raw_arguments,
    _version,
    call_result,
    tool_listing,
)
from rsilab.mcp.wire import MAX_MESSAGE_BYTES
from rsilab.records import Role
from rsilab.store.lab import Lab
from rsilab.web._hosts import LOOPBACK_NAMES, LocalOnly, Scope

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
"""Where the MCP endpoint is served."""

DEFAULT_PORT = 8767
"""The port when ``--http`` names none."""

TLS_WARNING = (
    "warning: serving MCP over plain HTTP on {where}: bearer tokens cross the network in clear "
    "text. Put TLS in a reverse proxy in front (see docs/remote-agents.md) and bind this "
    "server to loopback or a private network only."
)

INSTRUCTIONS = (
    "rsilab Experiment OS on campaign {campaign}. Your bearer token fixes your role and the "
    "name recorded for you; tools/list shows what your role may call. Every call is "
    "role-checked, validated and recorded in the lab's ledger; a failed call returns a JSON "
    "error naming the argument at fault. Numbers you log are marked agent-reported and never "
    "count: only the controller's private evaluations do. File paths are relative to your "
    "workspace on the server."
)


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``HOST`` or ``[IPV6]:PORT`` as (host, port); the host must be an IP
    address or ``localhost``.

    Raises:
        UserError: anything else, naming what was wrong.
    """
    host, port_text = text.strip(), str(DEFAULT_PORT)
    if host.startswith("["):
        inside, _, rest = host[1:].partition("]")
        host = inside
        if rest:
            if not rest.startswith(":"):
                raise _bad_address(text)
            port_text = rest[1:]
    elif host.count(":") == 1:
        host, port_text = host.split(":")
    if host != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise _bad_address(text) from None
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise _bad_address(text)
    return host, int(port_text)


def _bad_address(text: str) -> UserError:
    return UserError(
        f"--http {text[:100]!r} is not an address to bind",
        "write HOST:PORT with an IP address (127.0.0.1:8767, [::1]:8767, 10.0.0.5:8767)",
    )


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses."""
    return host == "localhost" or ipaddress.ip_address(host).is_loopback


class McpHosts(LocalOnly):
    """The dashboard's Host and Origin rule (:class:`rsilab.web._hosts.LocalOnly`), worded
    for an MCP client."""

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        found = super().refusal(scope)
        if found is None:
            return None
        status, _ = found
        if status == 421:
            names = ", ".join(sorted(self.names))
            return status, (
                f"refused: this MCP server answers only to {names}; use the URL it printed "
                "(or start it with --host-name for the name a proxy forwards)"
            )
        if status == 403:
            return status, "refused: the request was sent from another site's web page"
        return status, "refused: the request must name exactly one Host"


class _Workspaces:
    """Each actor's folder on this machine, made on its first call."""

    def __init__(self, root: Path) -> None:
        self._root = root

    def context(self, grant: tokens.Grant) -> CallContext:
        folder = self._root / grant.campaign_id / grant.actor
        folder.mkdir(parents=True, exist_ok=True)
        return CallContext(grant.actor, grant.role, grant.campaign_id, folder)


def build_http_server(expos: ExperimentOS, campaign_id: str, workspaces: Path) -> Server[Any]:
    """An MCP server whose every request acts with its HTTP request's token grant: the tools
    that grant's role may call, the actor it names, in that actor's folder under
    ``workspaces``. Calls run in worker threads, as over stdio."""
    folders = _Workspaces(workspaces)
    listings = {role: tool_listing(expos, role) for role in Role if role.is_agent}

    async def list_tools(
        rctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return listings[grant_of(rctx.request).role]

    async def call_tool(
        rctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        grant = grant_of(rctx.request)
        raw = _RAW_ARGUMENTS.get()
        arguments = raw[0] if raw is not None else params.arguments

        def call() -> ToolResult:  # one thread hop: the folder is made beside the call
            return expos.call(folders.context(grant), params.name, arguments)

        return call_result(await anyio.to_thread.run_sync(call))

    server: Server[Any] = Server(
        SERVER_NAME,
        version=_version(),
        instructions=INSTRUCTIONS.format(campaign=campaign_id),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    server.middleware.append(_keep_raw_arguments)
    return server


def build_app(
    expos: ExperimentOS, server: Server[Any], campaign_id: str, names: Iterable[str]
) -> tuple[Starlette, RecordRefusals]:
    """The ASGI app (the checks of the module, then the SDK's session manager at
    :data:`MCP_PATH`) and its refusal recorder (to report what it only counted). A body the
    wire refuses is recorded through ``expos`` under the token's grant."""
    store = expos.store
    manager = StreamableHTTPSessionManager(app=server, max_request_body_size=MAX_MESSAGE_BYTES)
    endpoint = CheckedBodies(StreamableHTTPASGIApp(manager), expos)
    refusals = RecordRefusals(endpoint, store, campaign_id, RefusalLimiter())

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    app = Starlette(
        routes=[Route(MCP_PATH, endpoint=refusals)],
        middleware=[
            Middleware(McpHosts, names=tuple(names)),
            Middleware(AuthenticationMiddleware, backend=TokenBackend(store, campaign_id)),
        ],
        lifespan=lifespan,
    )
    return app, refusals


def host_names(host: str, extra: Iterable[str]) -> tuple[str, ...]:
    """The names requests may use: loopback's, the bound address (unless a wildcard) and
    ``extra`` (what a reverse proxy forwards)."""
    bound = () if host in ("0.0.0.0", "::") else (host,)
    return (*LOOPBACK_NAMES, *bound, *extra)


def url_of(host: str, port: int) -> str:
    """The endpoint's URL for a bound host and port."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{MCP_PATH}"


def run_http_server(
    lab_path: Path | None,
    campaign_ref: str | None,
    address: str,
    *,
    allow_remote: bool = False,
    extra_names: Iterable[str] = (),
    announce: Callable[[str], None] = print,
) -> None:
    """Serve the campaign over MCP/HTTP at ``address`` until SIGINT or SIGTERM.

    Announces the endpoint's URL (with the port chosen when ``address`` asks for port 0)
    once it is listening. On the way out, refusals counted without an event are recorded as
    one, a proposal being judged reaches its verdict, and the lab is closed (signed).

    Raises:
        UserError: no campaign given or found, a bad address, a non-loopback address without
            ``allow_remote``, or an address that cannot be bound -- before anything is served.
    """
    if campaign_ref is None:
        raise UserError(
            "MCP over HTTP serves one campaign, and none was given",
            "pass --campaign ID (or --campaign latest); list them with `rsilab campaign list`",
        )
    host, port = parse_address(address)
    if not is_loopback(host) and not allow_remote:
        raise UserError(
            f"{host} is not a loopback address, and plain HTTP exposes the tokens on the network",
            "pass --allow-remote to bind it anyway (put TLS in a reverse proxy; see "
            "docs/remote-agents.md), or bind 127.0.0.1",
        )
    with Lab.open(lab_path) as lab:
        campaign = find_campaign(lab.store, campaign_ref)
        listener = _listen(host, port)
        services = LabServices(lab)
        try:
            expos = ExperimentOS(lab.store, lab.artifacts, default_registry(), services)
            server = build_http_server(expos, campaign.id, lab.path.resolve() / "workspaces")
            app, refusals = build_app(expos, server, campaign.id, host_names(host, extra_names))
            where = url_of(host, listener.getsockname()[1])
            if not is_loopback(host):
                print(TLS_WARNING.format(where=where), file=sys.stderr, flush=True)
            announce(f"serving campaign {campaign.id} over MCP at {where}; stop with Ctrl-C")
            config = uvicorn.Config(
                app, log_level="warning", access_log=False, timeout_graceful_shutdown=5
            )
            serving = uvicorn.Server(config)
            with _stop_signals_end_serving(serving):
                serving.run(sockets=[listener])
            refusals.record_unreported()
        finally:
            listener.close()
            services.close(wait=True)  # let a proposal being judged reach its verdict


@contextlib.contextmanager
def _stop_signals_end_serving(serving: uvicorn.Server) -> Iterator[None]:
    """While inside, SIGINT and SIGTERM only end serving. Uvicorn shuts down on them and then
    raises the signal again against the handlers it found: these, which only ask it to stop
    (as one arriving before it listens must), so the lab is still closed (and its ledger
    signed) after it returns, rather than the process killed. A signal ignored when the
    process started stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(_sig: int, _frame: object) -> None:
        serving.should_exit = True

    previous = {  # one ignored when rsilab started stays ignored (nohup, `&` in a script)
        sig: signal.signal(sig, stop)
        for sig in (signal.SIGINT, signal.SIGTERM)
        if signal.getsignal(sig) is not signal.SIG_IGN
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port``. Made with protocol ``IPPROTO_TCP``, not
    0 as :func:`socket.create_server` leaves it: asyncio sets ``TCP_NODELAY`` only on
    sockets that name TCP, and without it every kept-alive request waits ~40 ms on Nagle
    and delayed ACKs."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(128)
    except OSError as exc:
        listener.close()
        raise UserError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            "choose another port, or an address of this machine",
        ) from exc
    return listener
