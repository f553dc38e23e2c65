"""``job_status`` over MCP: a long poll (``wait``) instead of a loop, a per-caller limit on
quick polls, and every call, refused or not, in the ledger.

A real lab runs the synthetic harness's jobs in the process sandbox (the job tools' bench).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client import Client

from rsilab.expos import CallContext
from rsilab.mcp import build_server
from rsilab.records import Role
from tests.expos.tools.jobs.test_jobs import Door

pytestmark = pytest.mark.anyio

BURST = 120
"""Quick polls a caller may make before the limit applies (the tool's documented burst)."""


@pytest.fixture
def door(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Door]:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    made = Door(tmp_path)
    yield made
    made.close()


def client(door: Door, actor: str = "agent-x") -> Client:
    ctx = CallContext(actor, Role.WORKER, door.campaign.id, door.workspace)
    return Client(build_server(door.expos, ctx))


def value(result: types.CallToolResult) -> dict[str, Any]:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    parsed = json.loads(block.text)
    assert isinstance(parsed, dict)
    return parsed


def status_calls(door: Door, actor: str) -> list[str]:
    """The outcome of each of ``actor``'s job_status calls in the ledger, in order."""
    events = door.lab.store.events(campaign_id=door.campaign.id)
    return [str(e.outcome) for e in events if e.actor == actor and e.tool == "job_status"]


async def test_a_wait_returns_once_the_job_has_moved_on(door: Door) -> None:
    exp = door.experiment()
    started = door.train(exp, wait=False)
    assert started["status"] == "queued"
    seen = ["queued"]
    async with client(door) as c:
        while seen[-1] != "succeeded":
            answer = await c.call_tool("job_status", {"job_id": started["job_id"], "wait": 60})
            assert not answer.is_error, value(answer)
            seen.append(value(answer)["status"])
            assert len(seen) <= 4, seen  # each answer is a change, so at most 3 of them
    assert all(a != b for a, b in itertools.pairwise(seen)), seen
    assert status_calls(door, "agent-x") == ["ok"] * (len(seen) - 1)


async def test_a_wait_above_the_bound_is_refused_and_recorded(door: Door) -> None:
    async with client(door) as c:
        answer = await c.call_tool("job_status", {"job_id": "job-000000000000", "wait": 61})
    assert answer.is_error and value(answer)["error"] == "invalid_arguments"
    assert value(answer)["field"] == "wait"
    assert status_calls(door, "agent-x") == ["error"]


async def test_quick_polls_are_limited_per_caller_and_each_refusal_recorded(door: Door) -> None:
    missing = {"job_id": "job-000000000000"}
    codes: list[str] = []
    async with client(door) as c:
        while "rate_limited" not in codes and len(codes) < 20 * BURST:
            codes.append(value(await c.call_tool("job_status", missing))["error"])
        async with client(door, "agent-y") as other:
            elsewhere = value(await other.call_tool("job_status", missing))["error"]
    assert codes[-1] == "rate_limited", codes[-3:]
    assert len(codes) > BURST and set(codes[:BURST]) == {"not_found"}
    assert elsewhere == "not_found"  # another caller has its own share
    assert status_calls(door, "agent-x") == ["error"] * len(codes)
    refusals = [
        (e.actor, e.error)
        for e in door.lab.store.events(campaign_id=door.campaign.id)
        if e.error is not None and e.error.get("error") == "rate_limited"
    ]
    assert [actor for actor, _ in refusals] == ["agent-x"]
    assert "wait" in str(refusals[0][1]["message"])
