"""MCP round-trip over stdio (SDK stdio client -> `python -m rsilab.mcp` subprocess -> ledger)
and over HTTP (SDK streamable HTTP client with a bearer token -> `rsilab mcp --http` on
loopback -> ledger)."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from benchmarks import key_dir_at
from rsilab.expos import open_campaign
from rsilab.mcp import tokens
from rsilab.records import Role, TaskRef
from rsilab.store import Lab

TOOL = "list_directions"
WARMUP = 10


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return statistics.median(ordered) * 1e3, p99 * 1e3


async def _measure(params: StdioServerParameters, n: int, errlog: Any) -> tuple[float, list[float]]:
    """Seconds to spawn and connect, and the seconds of each of ``n`` timed calls."""
    started = time.perf_counter()
    async with Client(stdio_client(params, errlog=errlog)) as client:
        startup = time.perf_counter() - started
        samples = await _timed_calls(client, n)
    return startup, samples


async def _timed_calls(client: Client, n: int) -> list[float]:
    """The seconds of each of ``n`` calls of :data:`TOOL`, after :data:`WARMUP` untimed ones."""
    await client.list_tools()  # the client checks results against the listing it caches
    for _ in range(WARMUP):
        await client.call_tool(TOOL, {})
    samples = []
    for _ in range(n):
        begin = time.perf_counter()
        result = await client.call_tool(TOOL, {})
        samples.append(time.perf_counter() - begin)
        if result.is_error:
            raise RuntimeError(f"{TOOL} failed over MCP: {result.content}")
    return samples


async def _measure_http(url: str, token: str, n: int) -> list[float]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        return await _timed_calls(client, n)


@contextlib.contextmanager
def _http_server(lab: Path, campaign_id: str, errlog: Any) -> Iterator[str]:
    """``rsilab mcp --http 127.0.0.1:0`` as a process; its URL. Stopped with SIGTERM."""
    command = [sys.executable, "-m", "rsilab", "mcp", "--http", "127.0.0.1:0"]
    command += ["--campaign", campaign_id, "--lab", str(lab)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errlog, text=True)
    lines: queue.Queue[str] = queue.Queue()
    stdout = process.stdout
    assert stdout is not None

    def read() -> None:
        for line in stdout:
            lines.put(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        announced = lines.get(timeout=60)  # "serving campaign C over MCP at URL; stop with ..."
        yield announced.split(" at ", 1)[1].split(";", 1)[0]
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        reader.join(timeout=10)
        stdout.close()


def _http_row(tmp: Path, campaign_id: str, n: int) -> dict[str, Any]:
    """p50/p99 of one tools/call round trip over streamable HTTP on loopback, token checked."""
    with Lab.open(tmp / "lab") as lab:
        _, token = tokens.issue(lab.store, campaign_id, Role.WORKER, "bench", timedelta(hours=1))
    with (
        (tmp / "http.err").open("w") as errlog,
        _http_server(tmp / "lab", campaign_id, errlog) as url,
    ):
        samples = anyio.run(_measure_http, url, token, n)
    p50, p99 = _percentiles(samples)
    return {
        "benchmark": f"mcp round-trip over HTTP with a bearer token ({TOOL})",
        "calls": n,
        "p50_ms": round(p50, 3),
        "p99_ms": round(p99, 3),
        "target": "informational (next to stdio's)",
    }


def run(quick: bool) -> list[dict[str, Any]]:
    """p50/p99 of one tools/call round trip over stdio and over HTTP, and the stdio server's
    start-up time."""
    n = 50 if quick else 200
    with tempfile.TemporaryDirectory() as tmp, key_dir_at(Path(tmp) / "keys"):
        with Lab.init(Path(tmp) / "lab") as lab:
            campaign = open_campaign(lab.store, TaskRef(name="bench"))
        args = ["-m", "rsilab.mcp", "--lab", str(Path(tmp) / "lab"), "--role", "worker"]
        params = StdioServerParameters(
            command=sys.executable,
            args=[*args, "--campaign", campaign.id, "--actor", "bench"],
            env={"RSILAB_KEY_DIR": os.environ["RSILAB_KEY_DIR"]},
            cwd=tmp,
        )
        with (Path(tmp) / "server.err").open("w") as errlog:
            startup, samples = anyio.run(_measure, params, n, errlog)
        http_row = _http_row(Path(tmp), campaign.id, n)
    p50, p99 = _percentiles(samples)
    return [
        {
            "benchmark": f"mcp round-trip over stdio ({TOOL})",
            "calls": n,
            "p50_ms": round(p50, 3),
            "p99_ms": round(p99, 3),
            "target": "p50 < 10 ms",
        },
        http_row,
        {
            "benchmark": "mcp server start-up over stdio (spawn + handshake)",
            "calls": 1,
            "p50_ms": round(startup * 1e3, 1),
            "p99_ms": round(startup * 1e3, 1),
            "target": "informational",
        },
    ]


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row)
