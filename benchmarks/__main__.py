"""Run the benchmarks, print them as tables and write ``BENCHMARKS.md``.

``python -m benchmarks`` runs the full set; ``--quick`` runs smaller sizes. Targets are
printed beside the numbers; they are never asserted in the test suite.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

SUITES = [
    "benchmarks.bench_ledger",
    "benchmarks.bench_dispatch",
    "benchmarks.bench_mcp",
    "benchmarks.bench_tasks",
    "benchmarks.bench_textcls",
    "benchmarks.bench_sandbox",
    "benchmarks.bench_escape",
]


def _machine() -> str:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return (
        f"{datetime.now(UTC):%Y-%m-%d}, commit {commit or 'unknown'}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, {platform.system()} {platform.machine()}"
    )


def _markdown(title: str, rows: list[dict[str, Any]]) -> str:
    columns = list(dict.fromkeys(k for row in rows for k in row))
    lines = [f"## {title}", "", "| " + " | ".join(columns) + " |"]
    lines.append("|" + "---|" * len(columns))
    for row in rows:
        lines.append("| " + " | ".join(str(row.get(c, "")) for c in columns) + " |")
    return "\n".join(lines) + "\n"


def _table(title: str, rows: list[dict[str, Any]]) -> Table:
    table = Table(title=title)
    columns = list(dict.fromkeys(k for row in rows for k in row))
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(str(row.get(c, "")) for c in columns))
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--out", default="BENCHMARKS.md", help="markdown file to write")
    args = parser.parse_args(argv)
    console = Console()
    sections = [
        "# Benchmarks",
        "",
        f"Measured by `make bench{'-quick' if args.quick else ''}` on {_machine()}.",
        "Targets are goals, not assertions; a miss is reported here, not hidden.",
        "",
    ]
    for name in SUITES:
        module = importlib.import_module(name)
        run: Callable[[bool], list[dict[str, Any]]] = module.run
        title = (module.__doc__ or name).strip().splitlines()[0].rstrip(".")
        rows = run(args.quick)
        console.print(_table(title, rows))
        sections.append(_markdown(title, rows))
    Path(args.out).write_text("\n".join(sections))
    console.print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
