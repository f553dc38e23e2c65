"""A remote agent for tests/mcp/test_http.py: run in another network namespace, it follows
a JSON plan from stdin against an MCP server over HTTP and prints what happened as JSON.

Each step talks from its own source address (``source``), so the server sees it as a
different client. Steps:

- ``{"op": "session", "token", "source", "calls": [[tool, arguments], ...]}``: the SDK's
  client over streamable HTTP; the tools listed and each call's ``is_error`` and JSON text.
- ``{"op": "refused_session", "token", "source"}``: the SDK's client, which must fail; the
  error it raised.
- ``{"op": "raw", "token", "source", "count", "headers"}``: ``count`` POSTs of an
  ``initialize`` request (20 at a time); their statuses, and the first's
  ``WWW-Authenticate`` header and body.

It imports nothing of rsilab: it stands for an agent on another machine.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "peer", "version": "0"},
    },
}


def _client(token: str | None, source: str, headers: dict[str, str] | None = None) -> Any:
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    return httpx2.AsyncClient(
        transport=httpx2.AsyncHTTPTransport(local_address=source),
        headers=sent,
        timeout=httpx2.Timeout(30.0, read=60.0),
    )


async def session(url: str, step: dict[str, Any]) -> dict[str, Any]:
    async with (
        _client(step["token"], step["source"]) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        tools = [t.name for t in (await client.list_tools()).tools]
        calls = []
        for name, arguments in step["calls"]:
            result = await client.call_tool(name, arguments)
            text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
            calls.append({"is_error": result.is_error, "value": json.loads(text)})
    return {"tools": tools, "calls": calls}


async def refused_session(url: str, step: dict[str, Any]) -> dict[str, Any]:
    try:
        async with (
            _client(step["token"], step["source"]) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            await client.list_tools()
    except Exception as exc:  # what the SDK raises for a 401 is the point of the step
        return {"refused": True, "error": f"{type(exc).__name__}: {exc}"}
    return {"refused": False, "error": ""}


async def raw(url: str, step: dict[str, Any]) -> dict[str, Any]:
    headers = {"Accept": "application/json, text/event-stream", **step.get("headers", {})}
    statuses: list[int] = []
    first: Any = None
    async with _client(step["token"], step["source"], headers) as http:
        remaining = step.get("count", 1)
        while remaining:
            batch = min(20, remaining)
            answers = await asyncio.gather(*(http.post(url, json=INITIALIZE) for _ in range(batch)))
            if first is None:
                first = answers[0]
            statuses += [a.status_code for a in answers]
            remaining -= batch
    return {
        "statuses": statuses,
        "www_authenticate": first.headers.get("www-authenticate", ""),
        "body": first.text[:500],
    }


STEPS = {"session": session, "refused_session": refused_session, "raw": raw}


async def main() -> None:
    plan = json.load(sys.stdin)
    results = [await STEPS[step["op"]](plan["url"], step) for step in plan["steps"]]
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
