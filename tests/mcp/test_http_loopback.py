"""MCP over HTTP on loopback, the client in this process: what needs no second network
namespace (so it runs without root): a worker's call, a session held by one token, deep
arguments refused by the dispatcher (and recorded), hostile bodies refused at the wire (each
with its JSON-RPC error, and recorded under the token's actor and role), and names the server
is not bound to."""

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
async def test_a_session_answers_only_its_token_and_deep_arguments_reach_the_ledger(
    lab: Prepared, running: Running
) -> None:
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
    call["params"] = {"name": "list_directions", "arguments": {}}
    async with _http(lab.texts["worker"]) as mine, _http(lab.texts["revoked_later"]) as other:
        session = await _session(mine, running.url)
        headers = {**ACCEPT, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
        taken = await other.post(running.url, json=call, headers=headers)
        assert taken.status_code == 404  # as if there were no such session
        deep: dict[str, Any] = {}
        inner = deep
        for _ in range(100):  # past the dispatcher's limit (64), within the wire's (128)
            inner["a"] = {}
            inner = inner["a"]
        too_deep = {"jsonrpc": "2.0", "id": 4, "method": "tools/call"}
        too_deep["params"] = {"name": "create_experiment", "arguments": {"config": deep}}
        typed = {**headers, "Content-Type": "application/json"}
        refused = await mine.post(running.url, content=json.dumps(too_deep), headers=typed)
    assert refused.status_code == 200 and "invalid_arguments" in refused.text
    with Lab.open(lab.lab) as opened:
        last = [e for e in opened.store.events(campaign_id=lab.campaign_id) if e.tool][-1]
        assert (last.tool, last.actor, last.outcome) == (
            "create_experiment",
            "remote-w",
            Outcome.ERROR,
        )


def _data(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC answer in a response, plain JSON or one server-sent event."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        text = next(line[5:] for line in response.text.splitlines() if line.startswith("data:"))
    else:
        text = response.text
    answer = json.loads(text)
    assert isinstance(answer, dict)
    return answer


@pytest.mark.anyio
async def test_every_hostile_body_gets_its_error_and_the_session_goes_on(
    lab: Prepared, running: Running
) -> None:
    listing = json.dumps({"jsonrpc": "2.0", "id": "next", "method": "tools/list"})
    async with _http(lab.texts["worker"]) as http:
        session = await _session(http, running.url)
        headers = {**ACCEPT, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
        headers["Content-Type"] = "application/json"
        for case in CASES:
            refused = await http.post(running.url, content=case.data, headers=headers)
            assert refused.status_code == 400, (case.name, refused.text[:300])
            error_of(_data(refused), case)
            listed = await http.post(running.url, content=listing, headers=headers)
            assert _data(listed)["result"]["tools"], case.name
        many = _data(await http.post(running.url, content=many_keys_call(40), headers=headers))
        brackets = await http.post(running.url, content=brackets_in_a_string(41), headers=headers)
    assert many["id"] == 40 and "invalid_arguments" in many["result"]["content"][0]["text"]
    assert _data(brackets)["result"]["isError"] is False
    with Lab.open(lab.lab) as opened:
        tools = [e.tool for e in opened.store.events(campaign_id=lab.campaign_id) if e.tool]
        recorded = refusals_in(opened.store)
    assert tools[-2:] == ["list_files", "write_file"]  # the refused bodies never became calls
    assert "write_file" not in tools[:-1]
    assert len(recorded) == len(CASES)  # each one is in the ledger


@pytest.mark.anyio
async def test_refused_bodies_are_recorded_under_each_tokens_grant(
    lab: Prepared, running: Running
) -> None:
    listing = json.dumps({"jsonrpc": "2.0", "id": "after", "method": "tools/list"})
    answers: list[dict[str, Any]] = []
    async with _http(lab.texts["worker"]) as first, _http(lab.texts["revoked_later"]) as second:
        for http, body in (
            (first, just_over_the_limit("big")),
            (second, objects_deep("deep")),
            (first, objects_deep("deep-2", levels=129)),
        ):
            session = await _session(http, running.url)
            headers = {**ACCEPT, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
            headers["Content-Type"] = "application/json"
            refused = await http.post(running.url, content=body, headers=headers)
            assert refused.status_code == 400, refused.text[:300]
            answers.append(_data(refused))
            listed = await http.post(running.url, content=listing, headers=headers)
            assert _data(listed)["result"]["tools"]  # the session goes on
    assert "8388609 bytes" in answers[0]["error"]["message"]
    assert [a["id"] for a in answers[1:]] == ["deep", "deep-2"]
    with Lab.open(lab.lab) as opened:
        (e1, f1), (e2, f2), (e3, f3) = refusals_in(opened.store)
        check_refusal(e1, f1, "remote-w", "worker", lab.campaign_id, "8388609 bytes")
        check_refusal(e2, f2, "remote-r", "worker", lab.campaign_id, "deeper than 128 levels")
        check_refusal(e3, f3, "remote-w", "worker", lab.campaign_id, "deeper than 128 levels")
        assert verify_store(opened.store).ok


@pytest.mark.anyio
async def test_a_hostile_body_without_a_token_gets_401_not_an_answer(
    lab: Prepared, running: Running
) -> None:
    async with httpx2.AsyncClient(timeout=60) as http:
        deep = CASES[0].data
        refused = await http.post(running.url, content=deep, headers=ACCEPT)
    assert refused.status_code == 401
    with Lab.open(lab.lab) as opened:  # the token's refusal is flagged; the body never read
        assert refusals_in(opened.store) == []


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
