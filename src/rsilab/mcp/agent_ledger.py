"""The ledger events of ``rsilab agent`` (:mod:`rsilab.mcp.agent_run`): the session's start and
end, and each connection to an LLM endpoint; all are the agent's (its actor and role), on its
campaign, so `rsilab ledger` and the dashboard show an external agent's whole session.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence

from rsilab.expos import CallContext
from rsilab.mcp.llm_relay import Connection
from rsilab.records import EventDraft, Outcome, Resources
from rsilab.sandbox import RunResult
from rsilab.store.base import Store

NET_ACTION = "agent_net_connect"
"""The ledger action of one connection to an LLM endpoint, recorded when it closes."""
SESSION_START = "agent_session_started"
"""The ledger action recorded just before CMD starts; its detail is the command."""
SESSION_END = "agent_session_ended"
"""The ledger action recorded when CMD has ended: how, output dropped, and its wall time."""


def exit_status(result: RunResult) -> int:
    """CMD's exit code; 128+N when a signal N ended it, 137 when a limit did."""
    if result.killed is not None:
        return 137
    if result.exit_code is not None:
        return result.exit_code
    return 128 + (result.signal or 9)


def _record(
    store: Store,
    ctx: CallContext,
    action: str,
    detail: str,
    *,
    ok: bool = True,
    cost: Resources | None = None,
) -> None:
    """The one place the agent's session writes the ledger: an event of the agent (its actor
    and role) on its campaign."""
    store.commit(
        EventDraft(
            actor=ctx.actor,
            role=str(ctx.role),
            action=action,
            campaign_id=ctx.campaign_id,
            outcome=Outcome.OK if ok else Outcome.ERROR,
            detail=detail,
            cost=cost,
        )
    )


def recorder(store: Store, ctx: CallContext) -> Callable[[Connection], None]:
    """Record each ended connection to an endpoint as a :data:`NET_ACTION` event of the
    agent, on its campaign: the endpoint, bytes each way and how long (its ``wall_s``)."""

    def record(done: Connection) -> None:
        if done.error is None:
            what = f"{done.sent} bytes sent, {done.received} received"
        else:
            what = f"not reached: {done.error}"
        _record(
            store,
            ctx,
            NET_ACTION,
            f"{done.endpoint}: {what}",
            ok=done.error is None,
            cost=Resources(wall_s=round(done.seconds, 3)),
        )

    return record


def session_start(store: Store, ctx: CallContext, argv: Sequence[str]) -> None:
    """Record :data:`SESSION_START` of the agent on its campaign; the detail is the command
    (shell-quoted, cut to 500 characters)."""
    command = shlex.join(argv)
    _record(store, ctx, SESSION_START, command if len(command) <= 500 else command[:497] + "...")


def session_end(store: Store, ctx: CallContext, result: RunResult | None, error: str = "") -> None:
    """Record :data:`SESSION_END`: ok for exit status 0, an error otherwise; the detail says
    how CMD ended (``exit N``, ``signal N``, ``killed: LIMIT limit (137)``, or ``error`` when
    ``result`` is None: the sandbox could not start it, or rsilab was interrupted) and the
    bytes of output dropped past the cap; the cost has its wall and CPU seconds and peak
    memory."""
    if result is None:
        _record(store, ctx, SESSION_END, error[:500], ok=False)
        return
    if result.killed is not None:
        how = f"killed: {result.killed} limit"
    elif result.exit_code is not None:
        how = f"exit {result.exit_code}"
    else:
        how = f"signal {result.signal}"
    dropped = result.stdout_dropped + result.stderr_dropped
    if dropped:
        how += (
            "; output past the cap dropped: "
            f"{result.stdout_dropped} bytes of stdout, {result.stderr_dropped} of stderr"
        )
    _record(
        store,
        ctx,
        SESSION_END,
        f"{how} ({exit_status(result)})" if result.killed else how,
        ok=result.ok,
        cost=Resources(
            wall_s=round(result.wall_s, 3),
            cpu_s=round(result.cpu_s, 3),
            peak_rss_mb=round(result.peak_memory_mb, 1),
        ),
    )
