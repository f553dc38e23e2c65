"""MCP round-trip over stdio: SDK stdio client -> `python -m rsilab.mcp` subprocess -> ledger."""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from benchmarks import key_dir_at
from rsilab.expos import open_campaign
from rsilab.records import TaskRef
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
    return startup, samples


def run(quick: bool) -> list[dict[str, Any]]:
    """p50/p99 of one tools/call round trip over stdio, and the server's start-up time."""
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
    p50, p99 = _percentiles(samples)
    return [
        {
            "benchmark": f"mcp round-trip over stdio ({TOOL})",
            "calls": n,
            "p50_ms": round(p50, 3),
            "p99_ms": round(p99, 3),
            "target": "p50 < 10 ms",
        },
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
