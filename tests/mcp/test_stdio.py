"""End to end over real stdio: ``python -m rsilab.mcp`` as a subprocess, the SDK's stdio client."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from rsilab.errors import LabError, UserError
from rsilab.expos import CallContext, ExperimentOS, default_registry, open_campaign, policy
from rsilab.mcp import run_stdio_server
from rsilab.mcp.__main__ import main
from rsilab.records import Experiment, Outcome, ProtocolFlag, Role, TaskRef
from rsilab.store import Lab, verify_store


def prepared_lab(path: Path) -> tuple[str, str]:
    """A lab with a campaign and one direction; returns (campaign id, direction id)."""
    with Lab.init(path) as lab:
        campaign = open_campaign(lab.store, TaskRef(name="digits"))
        expos = ExperimentOS(lab.store, lab.artifacts, default_registry())
        main_ctx = CallContext("main-1", Role.MAIN, campaign.id)
        made = expos.call(main_ctx, "create_direction", {"title": "wd", "hypothesis": "h"})
        assert made.value is not None
        return campaign.id, made.value["id"]


def server_params(lab: Path, campaign_id: str, workspace: Path) -> StdioServerParameters:
    args = ["-m", "rsilab.mcp", "--lab", str(lab), "--role", "worker"]
    args += ["--campaign", campaign_id, "--workspace", str(workspace), "--actor", "agent-x"]
    return StdioServerParameters(
        command=sys.executable,
        args=args,
        env={"RSILAB_KEY_DIR": os.environ["RSILAB_KEY_DIR"]},
        cwd=str(workspace),
    )


@pytest.mark.anyio
async def test_worker_over_stdio_lands_in_the_ledger(tmp_path: Path) -> None:
    lab_path, workspace = tmp_path / "lab", tmp_path / "ws"
    workspace.mkdir()
    campaign_id, direction_id = prepared_lab(lab_path)
    registry = default_registry()
    with (tmp_path / "server.err").open("w") as errlog:
        params = server_params(lab_path, campaign_id, workspace)
        async with Client(stdio_client(params, errlog=errlog)) as client:
            tools = (await client.list_tools()).tools
            made = await client.call_tool(
                "create_experiment", {"direction_id": direction_id, "description": "try"}
            )
            refused = await client.call_tool("create_direction", {"title": "t", "hypothesis": "h"})
    stderr = (tmp_path / "server.err").read_text()
    assert "Traceback" not in stderr, stderr
    assert [t.name for t in tools] == [
        t.name for t in registry.all() if policy.may_call(Role.WORKER, t.name)
    ]
    for listed in tools:
        tool = registry.get(listed.name)
        assert tool is not None and listed.input_schema == tool.input_schema()
    assert not made.is_error and refused.is_error
    assert isinstance(made.content[0], types.TextContent)
    experiment_id = json.loads(made.content[0].text)["id"]

    with Lab.open(lab_path) as lab:
        events = [e for e in lab.store.events(campaign_id=campaign_id) if e.tool]
        assert [(e.tool, e.actor, e.role, e.outcome) for e in events[-2:]] == [
            ("create_experiment", "agent-x", "worker", Outcome.OK),
            ("create_direction", "agent-x", "worker", Outcome.DENIED),
        ]
        assert lab.store.get_as(experiment_id, Experiment).created_by == "agent-x"
        assert [f.tool for f in lab.store.query_as(ProtocolFlag)] == ["create_direction"]
        assert lab.store.checkpoints()[-1].seq == lab.store.head()[0]  # closed cleanly, signed
        report = verify_store(lab.store)
        assert report.ok, report.problems


def test_agent_role_needs_a_campaign(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="campaign") as caught:
        run_stdio_server(tmp_path / "nolab", Role.WORKER, None, None, "agent-x")
    assert caught.value.hint


def test_missing_lab_and_unknown_campaign_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(LabError):
        run_stdio_server(tmp_path / "nolab", Role.WORKER, "latest", None, "agent-x")
    Lab.init(tmp_path / "lab").close()
    with pytest.raises(UserError, match="no campaign"):
        run_stdio_server(tmp_path / "lab", Role.WORKER, "cmp-0123456789ab", None, "agent-x")
    with pytest.raises(UserError, match="not a folder"):
        run_stdio_server(tmp_path / "lab", Role.WORKER, "latest", tmp_path / "nowhere", "x")


def test_module_entry_prints_user_errors_to_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--lab", str(tmp_path / "nolab"), "--role", "reviewer"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "campaign" in err and "hint" in err
