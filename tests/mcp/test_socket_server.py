"""The Experiment OS on a Unix socket, reached through the bridge by the SDK's stdio client.

On the host (no sandbox): the sandboxed path is covered by tests/cli/test_agent.py.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

import rsilab.mcp.bridge as bridge_module
from rsilab.errors import RsilabError
from rsilab.expos import CallContext, ExperimentOS
from rsilab.mcp.bridge import DEFAULT_SOCKET, socket_path
from rsilab.mcp.server import build_server
from rsilab.mcp.socket_server import socket_endpoint
from rsilab.mcp.wire import RecordRefusal
from rsilab.records import Campaign, Outcome, ProtocolFlag, Role
from rsilab.store import Lab, verify_store
from tests.mcp.hostile import (
    CASES,
    brackets_in_a_string,
    check_refusal,
    error_of,
    just_over_the_limit,
    many_keys_call,
    objects_deep,
    refusals_in,
)

BRIDGE = Path(bridge_module.__file__)


def bridge_params(sock: Path, workspace: Path) -> StdioServerParameters:
    """The bridge as an MCP client starts it: isolated mode, so it cannot import rsilab."""
    return StdioServerParameters(
        command=sys.executable, args=["-I", str(BRIDGE), str(sock)], env={}, cwd=str(workspace)
    )


HELLO = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}


def endpoint(
    expos: ExperimentOS,
    ctx: CallContext,
    sock: Path,
    owner: tuple[int, int] | None = None,
    recorder: RecordRefusal | None = None,
) -> Any:
    """The endpoint ``rsilab agent`` serves: refusals recorded by ``expos`` for ``ctx``
    unless another ``recorder`` is given."""
    chosen = recorder if recorder is not None else partial(expos.refused_message, ctx)
    return socket_endpoint(sock, lambda: build_server(expos, ctx), chosen, owner)


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder every user may traverse (pytest's tmp_path is root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="rsilab-test-sock-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.anyio
async def test_calls_through_the_bridge_land_in_the_ledger(
    tmp_path: Path, lab: Lab, campaign: Campaign, expos: ExperimentOS, workspace: Path
) -> None:
    ctx = CallContext("ext-agent", Role.WORKER, campaign.id, workspace)
    sock = tmp_path / "mcp.sock"
    with endpoint(expos, ctx, sock), (tmp_path / "bridge.err").open("w") as errlog:
        assert stat.S_IMODE(sock.stat().st_mode) == 0o600  # owner only
        async with Client(stdio_client(bridge_params(sock, workspace), errlog=errlog)) as client:
            tools = (await client.list_tools()).tools
            written = await client.call_tool("write_file", {"path": "a.txt", "content": "x"})
            refused = await client.call_tool("create_direction", {"title": "t", "hypothesis": "h"})
        # the listener outlives a session: a second client gets a session of its own
        async with Client(stdio_client(bridge_params(sock, workspace), errlog=errlog)) as again:
            listed = await again.call_tool("list_files", {})
    assert not sock.exists()
    assert "Traceback" not in (tmp_path / "bridge.err").read_text()
    assert "create_direction" not in [t.name for t in tools]
    assert not written.is_error and refused.is_error and not listed.is_error
    assert isinstance(listed.content[0], types.TextContent)
    assert [e["path"] for e in json.loads(listed.content[0].text)["entries"]] == ["a.txt"]
    assert (workspace / "a.txt").read_text() == "x"

    events = [e for e in lab.store.events(campaign_id=campaign.id) if e.tool]
    assert [(e.tool, e.actor, e.role, e.outcome) for e in events] == [
        ("write_file", "ext-agent", "worker", Outcome.OK),
        ("create_direction", "ext-agent", "worker", Outcome.DENIED),
        ("list_files", "ext-agent", "worker", Outcome.OK),
    ]
    assert [f.tool for f in lab.store.query_as(ProtocolFlag)] == ["create_direction"]


def test_a_line_that_is_not_json_rpc_does_not_end_the_session(
    tmp_path: Path, campaign: Campaign, expos: ExperimentOS, workspace: Path
) -> None:
    ctx = CallContext("ext-agent", Role.WORKER, campaign.id, workspace)
    sock = tmp_path / "mcp.sock"
    with endpoint(expos, ctx, sock), socket.socket(socket.AF_UNIX) as conn:
        conn.connect(str(sock))
        stream = conn.makefile("rwb")
        stream.write(b"this is not json\n\n" + json.dumps(HELLO).encode() + b"\n")
        stream.flush()
        refused = json.loads(stream.readline())
        answer = json.loads(stream.readline())
        stream.close()
    assert refused["id"] is None and refused["error"]["code"] == -32700  # the blank line: none
    assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "rsilab"


def _asker(conn: socket.socket) -> Any:
    stream = conn.makefile("rwb")

    def ask(line: bytes) -> dict[str, Any]:
        stream.write(line + b"\n")
        stream.flush()
        answer = json.loads(stream.readline())
        assert isinstance(answer, dict)
        return answer

    return ask


def test_every_hostile_line_gets_its_error_and_the_session_goes_on(
    tmp_path: Path, lab: Lab, campaign: Campaign, expos: ExperimentOS, workspace: Path
) -> None:
    ctx = CallContext("ext-agent", Role.WORKER, campaign.id, workspace)
    sock = tmp_path / "mcp.sock"
    with endpoint(expos, ctx, sock), socket.socket(socket.AF_UNIX) as conn:
        conn.connect(str(sock))
        conn.settimeout(60)  # a guard against a hang, not a measurement
        ask = _asker(conn)
        assert ask(json.dumps(HELLO).encode())["id"] == 1
        for case in CASES:
            error_of(ask(case.data), case)
            listed = ask(b'{"jsonrpc":"2.0","id":"next","method":"tools/list"}')
            assert listed["result"]["tools"], case.name
        many = ask(many_keys_call(40))
        brackets = ask(brackets_in_a_string(41))
    assert many["id"] == 40 and many["result"]["isError"] is True
    assert "invalid_arguments" in many["result"]["content"][0]["text"]
    assert brackets["id"] == 41 and brackets["result"]["isError"] is False
    assert (workspace / "brackets.txt").read_text().count("[{") == 50_000
    tools = [e.tool for e in lab.store.events(campaign_id=campaign.id) if e.tool]
    assert tools == ["list_files", "write_file"]  # the refused lines never became calls
    assert len(refusals_in(lab.store)) == len(CASES)  # and each one is in the ledger


def test_an_oversized_and_a_deep_line_are_recorded_under_the_sessions_caller(
    tmp_path: Path, lab: Lab, campaign: Campaign, expos: ExperimentOS, workspace: Path
) -> None:
    ctx = CallContext("sock-agent", Role.MAIN, campaign.id, workspace)
    sock = tmp_path / "mcp.sock"
    with endpoint(expos, ctx, sock), socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(60)  # a guard against a hang, not a measurement
        conn.connect(str(sock))
        ask = _asker(conn)
        assert ask(json.dumps(HELLO).encode())["id"] == 1
        big = ask(just_over_the_limit("big"))
        deep = ask(objects_deep("deep"))
        listed = ask(b'{"jsonrpc":"2.0","id":"after","method":"tools/list"}')
    assert big["error"]["code"] == -32600 and "8388609 bytes" in big["error"]["message"]
    assert deep["id"] == "deep" and "deeper than 128 levels" in deep["error"]["message"]
    assert listed["id"] == "after" and listed["result"]["tools"]
    (e1, f1), (e2, f2) = refusals_in(lab.store)
    check_refusal(e1, f1, "sock-agent", "main", campaign.id, "8388609 bytes")
    check_refusal(e2, f2, "sock-agent", "main", campaign.id, "deeper than 128 levels")
    assert verify_store(lab.store).ok


def test_a_ledger_that_cannot_record_a_refusal_does_not_end_the_session(
    tmp_path: Path, lab: Lab, campaign: Campaign, expos: ExperimentOS, workspace: Path
) -> None:
    def unavailable(problem: str) -> None:
        raise RsilabError(f"the lab is unavailable; not recorded: {problem}")

    ctx = CallContext("sock-agent", Role.WORKER, campaign.id, workspace)
    sock = tmp_path / "mcp.sock"
    with endpoint(expos, ctx, sock, recorder=unavailable), socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(60)  # a guard against a hang, not a measurement
        conn.connect(str(sock))
        ask = _asker(conn)
        assert ask(json.dumps(HELLO).encode())["id"] == 1
        deep = ask(objects_deep("deep", levels=130))
        listed = ask(b'{"jsonrpc":"2.0","id":"after","method":"tools/list"}')
    assert deep["id"] == "deep" and deep["error"]["code"] == -32600
    assert listed["id"] == "after" and listed["result"]["tools"]
    assert refusals_in(lab.store) == []


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv"
)
def test_only_the_owner_may_connect(
    open_folder: Path, campaign: Campaign, expos: ExperimentOS, workspace: Path
) -> None:
    ctx = CallContext("ext-agent", Role.WORKER, campaign.id, workspace)
    sock = open_folder / "mcp.sock"
    bridge = open_folder / "bridge.py"  # readable by the other users wherever the repo lies
    shutil.copyfile(BRIDGE, bridge)
    bridge.chmod(0o644)

    def bridge_as(uid: int) -> subprocess.CompletedProcess[bytes]:
        as_user = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
        return subprocess.run(
            [*as_user, sys.executable, "-I", str(bridge), str(sock)],
            input=json.dumps(HELLO).encode() + b"\n",
            capture_output=True,
            check=False,
            timeout=60,
        )

    with endpoint(expos, ctx, sock, owner=(65533, 65533)):
        assert stat.S_IMODE(sock.stat().st_mode) == 0o600
        assert sock.stat().st_uid == 65533
        owner, other = bridge_as(65533), bridge_as(65532)
    assert owner.returncode == 0, owner.stderr
    assert json.loads(owner.stdout)["result"]["serverInfo"]["name"] == "rsilab"
    assert other.returncode == 1 and b"Permission denied" in other.stderr


def test_bridge_without_a_socket_says_where_it_looked(tmp_path: Path) -> None:
    missing = tmp_path / "none.sock"
    done = subprocess.run(
        [sys.executable, "-I", str(BRIDGE), str(missing)],
        input=b"",
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 1
    assert str(missing).encode() in done.stderr and b"rsilab agent" in done.stderr
    assert done.stdout == b""


def test_bridge_socket_path_precedence() -> None:
    assert socket_path(["rsilab-mcp", "/a.sock"], {"RSILAB_MCP_SOCKET": "/b.sock"}) == "/a.sock"
    assert socket_path(["rsilab-mcp"], {"RSILAB_MCP_SOCKET": "/b.sock"}) == "/b.sock"
    assert socket_path(["rsilab-mcp"], {}) == DEFAULT_SOCKET


def test_bridge_imports_only_the_standard_library() -> None:
    source = BRIDGE.read_text()
    assert "rsilab." not in "".join(
        line for line in source.splitlines() if line.startswith(("import", "from"))
    )
    assert source.startswith("#!/usr/bin/env python3\n")
