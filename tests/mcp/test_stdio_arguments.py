"""``rsilab mcp`` over real stdio: the lab found from the environment or refused at start, and
calls whose arguments are not an object answered by the dispatcher and kept in the ledger.

The official client sends what a tool call's params allow (an object); a client that sends a
list or a number is played by a request type of this test's own, through the same session.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from rsilab.records import Outcome
from rsilab.store import Lab, verify_store
from tests.mcp.test_stdio import prepared_lab


class LooseCallParams(types.RequestParams):
    """``tools/call`` params whose ``arguments`` may be any JSON value."""

    name: str
    arguments: Any = None


class LooseCall(types.Request[LooseCallParams, Literal["tools/call"]]):
    """A ``tools/call`` request as a careless client might send it."""

    method: Literal["tools/call"] = "tools/call"
    params: LooseCallParams


def rsilab_mcp(lab: Path, workspace: Path, campaign_id: str) -> StdioServerParameters:
    """``rsilab mcp`` spawned as a client would: the lab named only by RSILAB_LAB, run from
    another folder."""
    args = ["-m", "rsilab", "mcp", "--role", "worker", "--campaign", campaign_id]
    return StdioServerParameters(
        command=sys.executable,
        args=[*args, "--workspace", str(workspace), "--actor", "agent-x"],
        env={"RSILAB_KEY_DIR": os.environ["RSILAB_KEY_DIR"], "RSILAB_LAB": str(lab)},
        cwd=str(workspace),
    )


def error_of(result: types.CallToolResult) -> dict[str, Any]:
    block = result.content[0]
    assert result.is_error and isinstance(block, types.TextContent)
    value = json.loads(block.text)
    assert isinstance(value, dict)
    return value


@pytest.mark.anyio
async def test_non_object_arguments_reach_the_dispatcher_and_the_ledger(tmp_path: Path) -> None:
    lab_path, workspace = tmp_path / "lab", tmp_path / "ws"
    workspace.mkdir()
    campaign_id, _ = prepared_lab(lab_path)
    sent: list[Any] = [["direction", "x"], 7, "not json", True]
    with (tmp_path / "server.err").open("w") as errlog:
        async with Client(stdio_client(rsilab_mcp(lab_path, workspace, campaign_id), errlog)) as c:
            answers = [
                await c.session.send_request(
                    LooseCall(params=LooseCallParams(name="create_experiment", arguments=value)),
                    types.CallToolResult,
                )
                for value in sent
            ]
            listed = await c.list_tools()
    assert "Traceback" not in (tmp_path / "server.err").read_text()
    assert listed.tools  # the same connection still serves
    assert [error_of(a)["error"] for a in answers] == ["invalid_arguments"] * len(sent)
    with Lab.open(lab_path) as lab:
        calls = [e for e in lab.store.events(campaign_id=campaign_id) if e.actor == "agent-x"]
        refused = [("create_experiment", Outcome.ERROR)] * len(sent)
        assert [(e.tool, e.outcome) for e in calls] == refused
        assert [e.seq for e in calls] == [a.meta and a.meta["rsilab/ledger_seq"] for a in answers]
        assert verify_store(lab.store).ok


def test_a_missing_lab_fails_at_start_in_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "RSILAB_LAB"}
    ran = subprocess.run(
        [sys.executable, "-m", "rsilab", "mcp", "--role", "worker", "--campaign", "latest"],
        cwd=tmp_path,
        env=env,
        input='{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}\n',
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 2
    assert ran.stdout == ""  # no protocol was spoken
    (line,) = ran.stderr.splitlines()
    assert line.startswith("error: no rsilab lab at") and "RSILAB_LAB" in line
