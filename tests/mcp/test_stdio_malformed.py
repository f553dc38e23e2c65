"""``rsilab mcp`` over real stdio, fed raw lines no official client sends: a tool call whose
arguments nest past the dispatcher's limit but within the wire's still reaches the dispatcher
and the ledger; every message the wire refuses (tests/mcp/hostile.py: 100,000 levels deep,
over 8 MiB, not UTF-8, not JSON...) gets its JSON-RPC error instead of silence, and leaves a
denied event with a protocol flag in the ledger. The same connection goes on serving
afterwards."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

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
from tests.mcp.test_stdio import prepared_lab

WAIT_S = 60.0  # a guard against a hang, not a measurement: answers come in well under 1 s


class Wire:
    """``python -m rsilab mcp`` as a subprocess, spoken to one JSON line at a time."""

    def __init__(self, lab: Path, workspace: Path, campaign_id: str) -> None:
        args = ["-m", "rsilab", "mcp", "--lab", str(lab), "--role", "worker"]
        args += ["--campaign", campaign_id, "--workspace", str(workspace), "--actor", "odd"]
        env = {**os.environ, "RSILAB_KEY_DIR": os.environ["RSILAB_KEY_DIR"]}
        self.proc = subprocess.Popen(
            [sys.executable, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=workspace,
        )
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": _hello()})
        assert "result" in self.receive()
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: Any) -> None:
        assert self.proc.stdin is not None
        if isinstance(message, bytes):
            self.proc.stdin.buffer.write(message + b"\n")
            self.proc.stdin.buffer.flush()
            return
        self.proc.stdin.write(message if isinstance(message, str) else json.dumps(message))
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()

    def receive(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], WAIT_S)
        assert ready, "no answer from rsilab mcp"
        answer = json.loads(self.proc.stdout.readline())
        assert isinstance(answer, dict)
        return answer

    def close(self) -> str:
        _, err = self.proc.communicate(timeout=WAIT_S)
        return err


def _hello() -> dict[str, Any]:
    return {
        "protocolVersion": "2025-03-26",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    }


def _nested(depth: int) -> Any:
    return json.loads("[" * depth + "]" * depth)


def _tool_error(answer: dict[str, Any]) -> str:
    result = answer["result"]
    assert result["isError"] is True
    return str(json.loads(result["content"][0]["text"])["error"])


@pytest.fixture
def wire(tmp_path: Path) -> Any:
    lab_path, workspace = tmp_path / "lab", tmp_path / "ws"
    workspace.mkdir()
    campaign_id, _ = prepared_lab(lab_path)
    served = Wire(lab_path, workspace, campaign_id)
    yield served, lab_path
    if served.proc.poll() is None:
        served.proc.kill()
    served.proc.communicate()  # reaps it and closes its pipes


@pytest.mark.parametrize("depth", [65, 120])
def test_deep_arguments_are_refused_by_the_dispatcher_and_recorded(wire: Any, depth: int) -> None:
    served, lab_path = wire
    call = {"name": "read_file", "arguments": _nested(depth)}
    served.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})
    answer = served.receive()
    assert answer["id"] == 1
    assert _tool_error(answer) == "invalid_arguments"
    served.send(
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_files"}}
    )
    assert served.receive()["id"] == 2  # the connection still serves
    assert "Traceback" not in served.close()
    with Lab.open(lab_path) as lab:
        refused = [e for e in lab.store.events() if e.tool == "read_file"]
    assert len(refused) == 1 and refused[0].outcome.value == "error"


@pytest.mark.parametrize("params", ["a string", ["a", "list"]])
def test_params_that_are_not_an_object_get_a_json_rpc_error(wire: Any, params: Any) -> None:
    served, _ = wire
    served.send({"jsonrpc": "2.0", "id": "q", "method": "tools/call", "params": params})
    answer = served.receive()
    assert answer["id"] == "q"
    assert answer["error"]["code"] == -32600
    assert answer["error"]["message"].startswith("invalid request: ")
    served.send({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    assert served.receive()["result"]["tools"]
    assert "Traceback" not in served.close()


def test_every_hostile_message_gets_its_error_and_the_session_goes_on(wire: Any) -> None:
    served, lab_path = wire
    for case in CASES:
        served.send(case.data)
        error_of(served.receive(), case)
        served.send({"jsonrpc": "2.0", "id": "next", "method": "tools/list"})
        assert served.receive()["result"]["tools"], case.name
    served.send(many_keys_call(40))
    many = served.receive()
    assert many["id"] == 40 and _tool_error(many) == "invalid_arguments"
    served.send(brackets_in_a_string(41))
    assert served.receive()["result"]["isError"] is False
    assert "Traceback" not in served.close()
    written = (lab_path.parent / "ws" / "brackets.txt").read_text()
    assert written.count("[{") == 50_000 and not (lab_path.parent / "ws" / "big.txt").exists()
    with Lab.open(lab_path) as lab:
        assert len(refusals_in(lab.store)) == len(CASES)


def test_an_oversized_and_a_deep_message_are_recorded_and_the_lab_verifies(
    wire: Any,
) -> None:
    served, lab_path = wire
    served.send(just_over_the_limit("big"))
    big = served.receive()
    served.send(objects_deep("deep"))
    deep = served.receive()
    served.send({"jsonrpc": "2.0", "id": "after", "method": "tools/list"})
    listed = served.receive()
    assert big["error"]["code"] == -32600 and "8388609 bytes" in big["error"]["message"]
    assert deep["id"] == "deep" and "deeper than 128 levels" in deep["error"]["message"]
    assert listed["id"] == "after" and listed["result"]["tools"]
    assert "Traceback" not in served.close()
    with Lab.open(lab_path) as lab:
        campaign_id = lab.store.events()[-1].campaign_id
        assert campaign_id is not None
        (e1, f1), (e2, f2) = refusals_in(lab.store)
        check_refusal(e1, f1, "odd", "worker", campaign_id, "8388609 bytes")
        check_refusal(e2, f2, "odd", "worker", campaign_id, "deeper than 128 levels")
        assert verify_store(lab.store).ok
