"""MCP over HTTP on loopback, the client in this process: what needs no second network
namespace (so it runs without root): a worker's call, a session held by one token, requests
the SDK cannot parse (still answered, and recorded), and names the server is not bound to."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from rsilab.records import Experiment, Outcome
from rsilab.store import Lab
from tests.mcp.http_helpers import Prepared, Running, prepared, serving

ACCEPT = {"Accept": "application/json, text/event-stream"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Prepared:
    made = prepared(tmp_path)
    monkeypatch.setenv("RSILAB_KEY_DIR", str(made.keys))
    return made


@pytest.fixture
def running(lab: Prepared) -> Iterator[Running]:
    with serving(lab, "127.0.0.1:0") as server:
        yield server


def _http(token: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)


def _text(result: types.CallToolResult) -> Any:
    content = result.content[0]
    assert isinstance(content, types.TextContent)
    return json.loads(content.text)


@pytest.mark.anyio
async def test_a_worker_over_loopback(lab: Prepared, running: Running) -> None:
    async with (
        _http(lab.texts["worker"]) as http,
        Client(streamable_http_client(running.url, http_client=http)) as client,
    ):
        made = await client.call_tool(
            "create_experiment", {"direction_id": lab.direction_id, "description": "loop"}
        )
    assert not made.is_error
    with Lab.open(lab.lab) as opened:
        experiment = opened.store.get_as(_text(made)["id"], Experiment)
        assert experiment.created_by == "remote-w"


async def _session(http: httpx2.AsyncClient, url: str) -> str:
    opened = await http.post(url, json=INITIALIZE, headers=ACCEPT)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    headers = {**ACCEPT, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
    ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(url, json=ready, headers=headers)).status_code == 202
    return session


@pytest.mark.anyio
async def test_a_session_answers_only_its_token_and_what_the_sdk_cannot_parse(
    lab: Prepared, running: Running
) -> None:
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
    call["params"] = {"name": "list_directions", "arguments": {}}
    async with _http(lab.texts["worker"]) as mine, _http(lab.texts["revoked_later"]) as other:
        session = await _session(mine, running.url)
        headers = {**ACCEPT, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
        taken = await other.post(running.url, json=call, headers=headers)
        assert taken.status_code == 404  # as if there were no such session
        malformed = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": "x"}
        answered = await mine.post(running.url, json=malformed, headers=headers)
        deep: dict[str, Any] = {}
        inner = deep
        for _ in range(300):  # deeper than the SDK's JSON parser reads (200)
            inner["a"] = {}
            inner = inner["a"]
        too_deep = {"jsonrpc": "2.0", "id": 4, "method": "tools/call"}
        too_deep["params"] = {"name": "create_experiment", "arguments": {"config": deep}}
        typed = {**headers, "Content-Type": "application/json"}
        refused = await mine.post(running.url, content=json.dumps(too_deep), headers=typed)
    assert answered.status_code == 200
    assert '"code":-32600' in answered.text.replace(" ", "")
    assert refused.status_code == 200 and "invalid_arguments" in refused.text
    with Lab.open(lab.lab) as opened:
        last = [e for e in opened.store.events(campaign_id=lab.campaign_id) if e.tool][-1]
        assert (last.tool, last.actor, last.outcome) == (
            "create_experiment",
            "remote-w",
            Outcome.ERROR,
        )


@pytest.mark.anyio
async def test_a_name_the_server_is_not_bound_to_is_refused(
    lab: Prepared, running: Running
) -> None:
    async with _http(lab.texts["worker"]) as http:
        rebound = await http.post(
            running.url, json=INITIALIZE, headers={**ACCEPT, "Host": "rebind.example"}
        )
        by_name = await http.post(
            running.url.replace("127.0.0.1", "localhost"), json=INITIALIZE, headers=ACCEPT
        )
    assert rebound.status_code == 421 and "rebind" not in rebound.text.split(";")[0]
    assert by_name.status_code == 200  # localhost is a loopback name


def test_a_proxy_name_is_accepted_with_host_name(lab: Prepared) -> None:
    with serving(lab, "127.0.0.1:0", "--host-name", "lab.example.org") as server:
        proxied = httpx2.post(
            server.url,
            json=INITIALIZE,
            headers={**ACCEPT, "Host": "lab.example.org", "Authorization": "Bearer x"},
        )
        other = httpx2.post(server.url, json=INITIALIZE, headers={**ACCEPT, "Host": "b.example"})
    assert proxied.status_code == 401  # past the Host check, to the token's
    assert other.status_code == 421
