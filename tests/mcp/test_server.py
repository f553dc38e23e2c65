"""The MCP server in-process, through the SDK's own Client: listing, calls, refusals, ledger."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client import Client
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from rsilab.expos import CallContext, ExperimentOS, policy
from rsilab.mcp import build_server
from rsilab.mcp.server import LEDGER_SEQ_META
from rsilab.records import Campaign, Experiment, Outcome, ProtocolFlag, Role
from rsilab.store import Lab, verify_store

pytestmark = pytest.mark.anyio


def allowed(expos: ExperimentOS, role: Role) -> list[str]:
    return [t.name for t in expos.registry.all() if policy.may_call(role, t.name)]


def client(
    expos: ExperimentOS,
    role: Role,
    campaign: Campaign,
    workspace: Path | None = None,
    **options: Any,
) -> Client:
    ctx = CallContext(f"{role}-1", role, campaign.id, workspace)
    return Client(build_server(expos, ctx), **options)


def payload(result: types.CallToolResult) -> dict[str, Any]:
    """The JSON text of a result; it must equal the structured content."""
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    value = json.loads(block.text)
    assert isinstance(value, dict)
    assert result.structured_content == value
    return value


async def call_ok(c: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await c.call_tool(tool, args)
    assert not result.is_error, payload(result)
    return payload(result)


def assert_verified(lab: Lab) -> None:
    report = verify_store(lab.store)
    assert report.ok, report.problems


async def test_listing_is_exactly_what_policy_allows(
    expos: ExperimentOS, campaign: Campaign
) -> None:
    async with client(expos, Role.WORKER, campaign) as c:
        worker = (await c.list_tools()).tools
    async with client(expos, Role.REVIEWER, campaign) as c:
        reviewer = (await c.list_tools()).tools
    assert [t.name for t in worker] == allowed(expos, Role.WORKER)
    assert [t.name for t in reviewer] == allowed(expos, Role.REVIEWER)
    assert {t.name for t in worker} != {t.name for t in reviewer}
    assert "create_experiment" in {t.name for t in worker} - {t.name for t in reviewer}
    assert "submit_review" in {t.name for t in reviewer} - {t.name for t in worker}
    for listed in worker + reviewer:
        tool = expos.registry.get(listed.name)
        assert tool is not None
        assert listed.description == tool.description
        assert listed.input_schema == tool.input_schema()


async def test_research_flow_is_recorded_with_actor_and_role(
    lab: Lab, expos: ExperimentOS, campaign: Campaign, workspace: Path
) -> None:
    async with client(expos, Role.MAIN, campaign) as main:
        direction = await call_ok(main, "create_direction", {"title": "wd", "hypothesis": "h"})
    async with client(expos, Role.WORKER, campaign, workspace) as worker:
        exp = await call_ok(
            worker,
            "create_experiment",
            {"direction_id": direction["id"], "description": "try", "config": {"lr": 0.1}},
        )
        logged = await worker.call_tool(
            "log_metric", {"experiment_id": exp["id"], "name": "accuracy", "value": 0.9}
        )
        assert not logged.is_error and payload(logged)["source"] == "agent-reported"
        shown = await call_ok(worker, "get_experiment", {"experiment_id": exp["id"]})
    assert shown["experiment"]["metrics"][0]["value"] == 0.9
    assert lab.store.get_as(exp["id"], Experiment).created_by == "worker-1"
    calls = {e.tool: e for e in lab.store.events(campaign_id=campaign.id) if e.tool}
    assert (calls["create_direction"].actor, calls["create_direction"].role) == ("main-1", "main")
    for tool in ("create_experiment", "log_metric", "get_experiment"):
        assert (calls[tool].actor, calls[tool].role, calls[tool].outcome) == (
            "worker-1",
            "worker",
            Outcome.OK,
        )
    assert logged.meta is not None and logged.meta[LEDGER_SEQ_META] == calls["log_metric"].seq
    assert_verified(lab)


async def test_invalid_arguments_name_the_field(
    lab: Lab, expos: ExperimentOS, campaign: Campaign
) -> None:
    async with client(expos, Role.WORKER, campaign) as c:
        result = await c.call_tool(
            "log_metric", {"experiment_id": "exp-0123456789ab", "name": "acc", "value": "high"}
        )
    assert result.is_error
    error = payload(result)
    assert (error["error"], error["field"]) == ("invalid_arguments", "value")
    event = lab.store.events(campaign_id=campaign.id)[-1]
    assert (event.tool, event.outcome, event.error) == ("log_metric", Outcome.ERROR, error)
    assert_verified(lab)


async def test_forbidden_tool_is_refused_by_the_dispatcher_and_flagged(
    lab: Lab, expos: ExperimentOS, campaign: Campaign
) -> None:
    async with client(expos, Role.WORKER, campaign) as c:
        assert "create_direction" not in {t.name for t in (await c.list_tools()).tools}
        result = await c.call_tool("create_direction", {"title": "t", "hypothesis": "h"})
    assert result.is_error
    assert "may not call" in payload(result)["message"]
    event = lab.store.events(campaign_id=campaign.id)[-1]
    assert (event.tool, event.actor, event.outcome) == ("create_direction", "worker-1", "denied")
    flags = lab.store.query_as(ProtocolFlag, fields={"campaign_id": campaign.id})
    assert [(f.tool, f.actor, f.role, f.blocked) for f in flags] == [
        ("create_direction", "worker-1", "worker", True)
    ]
    assert_verified(lab)


async def test_unknown_tool_is_an_error_result_and_recorded(
    lab: Lab, expos: ExperimentOS, campaign: Campaign
) -> None:
    async with client(expos, Role.WORKER, campaign) as c:
        result = await c.call_tool("list_direction", None)
    assert result.is_error
    error = payload(result)
    assert error["error"] == "unknown_tool" and "list_directions" in error["message"]
    assert lab.store.events(campaign_id=campaign.id)[-1].tool == "list_direction"


async def test_handshake_era_client_is_served_too(expos: ExperimentOS, campaign: Campaign) -> None:
    async with client(expos, Role.WORKER, campaign, mode="legacy") as c:
        assert c.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
        assert c.server_info is not None and c.server_info.name == "rsilab"
        names = [t.name for t in (await c.list_tools()).tools]
        listed = await call_ok(c, "list_directions", {})
    assert names == allowed(expos, Role.WORKER)
    assert listed == {"directions": []}
