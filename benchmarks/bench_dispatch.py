"""In-process tool dispatch overhead: validation + role check + guards + body + ledger event."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from rsilab.expos import (
    CallContext,
    Category,
    ExperimentOS,
    ToolEnv,
    ToolRegistry,
    default_registry,
    open_campaign,
    policy,
)
from rsilab.records import Role, TaskRef
from rsilab.store import Lab


def _noop_registry() -> ToolRegistry:
    """The built-in tools plus a no-op, so the pure overhead of the door can be measured."""
    registry = ToolRegistry()
    for tool in default_registry().all():
        registry.tool(tool.category)(tool.fn)

    @registry.tool(Category.EVIDENCE)
    def bench_noop(env: ToolEnv, value: int = 0) -> dict[str, Any]:
        """Return the value (benchmark only).

        Args:
            value: any integer.
        """
        return {"value": value}

    policy.TOOL_ROLES["bench_noop"] = frozenset({Role.WORKER})
    return registry


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return statistics.median(ordered) * 1e3, p99 * 1e3


def run(quick: bool) -> list[dict[str, Any]]:
    """p50/p99 per call of a read tool and a write tool, on a SQLite lab."""
    n = 500 if quick else 3_000
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("RSILAB_KEY_DIR", str(Path(tmp) / "keys"))
        with Lab.init(Path(tmp) / "lab") as lab:
            expos = ExperimentOS(lab.store, lab.artifacts, _noop_registry())
            campaign = open_campaign(lab.store, TaskRef(name="bench"))
            main = CallContext("main", Role.MAIN, campaign.id)
            worker = CallContext("worker", Role.WORKER, campaign.id, Path(tmp))
            direction = expos.call(main, "create_direction", {"title": "t", "hypothesis": "h"})
            assert direction.value is not None
            calls = {
                "no-op tool (pure overhead)": (worker, "bench_noop", {"value": 1}),
                "list_directions (read)": (worker, "list_directions", {}),
                "create_experiment (write)": (
                    worker,
                    "create_experiment",
                    {"direction_id": direction.value["id"], "description": "d", "config": {}},
                ),
                "refused call (role check + flag)": (worker, "create_direction", {"title": "x"}),
            }
            for label, (ctx, tool, args) in calls.items():
                samples = []
                for _ in range(n):
                    started = time.perf_counter()
                    expos.call(ctx, tool, args)
                    samples.append(time.perf_counter() - started)
                p50, p99 = _percentiles(samples[n // 10 :])  # drop warm-up
                rows.append(
                    {
                        "benchmark": f"in-process dispatch, {label}",
                        "calls": n,
                        "p50_ms": round(p50, 3),
                        "p99_ms": round(p99, 3),
                        "target": "p50 < 1 ms",
                    }
                )
    return rows


if __name__ == "__main__":
    for row in run(quick=True):
        print(row)
