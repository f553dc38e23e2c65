"""Run the benchmarks, print them as tables and write ``BENCHMARKS.md``.

``python -m benchmarks`` runs the full set; ``--quick`` runs smaller sizes, in sections whose
titles end in :data:`QUICK_MARK`, so the quick and the full tables live side by side in one
file and each run replaces only its own (and its line of the header). Targets are printed
beside the numbers; they are never asserted in the test suite.

A suite is a module with ``run(quick)`` (titled by the module docstring's first line) or a
``module:function`` entry (titled by the function's docstring; the rest of that docstring is
printed under the table as its notes). ``--only WORD`` runs the suites whose entry contains
WORD and replaces just their sections in the existing file, each marked with where it was
measured. Every write makes the "At a glance" section anew from the tables
(:mod:`benchmarks.glance`) and puts it first. Suites in :data:`FULL_ONLY` have no quick
size; the full search suites keep each finished run (``benchmarks/results/search``), so a
run cut off resumes where it stopped.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import platform
import re
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks import current_commit
from benchmarks import kept as kept_results
from benchmarks.glance import QUICK_MARK, with_glance

SUITES = [
    "benchmarks.bench_ledger",
    "benchmarks.bench_dispatch",
    "benchmarks.bench_ray",
    "benchmarks.bench_mcp",
    "benchmarks.bench_tasks",
    "benchmarks.bench_textcls",
    "benchmarks.bench_sandbox",
    "benchmarks.bench_escape",
    "benchmarks.bench_hacking:run_hacking",
    "benchmarks.bench_controller:run_throughput",
    "benchmarks.bench_controller:run_false_acceptance",
    "benchmarks.bench_power",
    "benchmarks.bench_null_campaigns",
    "benchmarks.bench_protocol:run_protocol",
    "benchmarks.bench_many_seeds:run_many_seeds",
    "benchmarks.bench_posttrain:run_posttrain",
    "benchmarks.bench_posttrain:run_posttrain_attacks",
    "benchmarks.bench_search:run_search_synthetic",
    "benchmarks.bench_tempering:run_tempering",
    "benchmarks.bench_campaigns:run_campaign_acceptance",
    "benchmarks.bench_campaigns:run_campaign_overhead",
    "benchmarks.bench_chaos:run_chaos_table",
    "benchmarks.bench_rounds:run_rounds_table",
    "benchmarks.bench_teams:run_team_comparison",
    "benchmarks.bench_dashboard:run_dashboard_render",
    "benchmarks.bench_mutation:run_mutation",
]

FULL_ONLY = {
    "benchmarks.bench_protocol:run_protocol",
    "benchmarks.bench_many_seeds:run_many_seeds",
    "benchmarks.bench_posttrain:run_posttrain",
    "benchmarks.bench_rounds:run_rounds_table",
    "benchmarks.bench_teams:run_team_comparison",
    "benchmarks.bench_dashboard:run_dashboard_render",
    "benchmarks.bench_mutation:run_mutation",
}
"""Suites with no quick size (hours on 2 cores even when small), or whose target is stated at
full size only (the dashboard's, at 10,000 experiments), or that only read what another command
measured (mutation testing: ``make mutate``): a quick run skips them."""

QUICK_ONLY = {"benchmarks.bench_search:run_search_synthetic"}
"""Suites a full run leaves to another: the full search tables are the registered protocol's
(``bench_protocol``); the quick synthetic search table stays as the quick look at search."""

Runner = Callable[[bool], list[dict[str, Any]]]
HEADER_LINES = {False: "Full tables: ", True: "Quick tables (titles end in (quick)): "}
"""How the header line of each kind of run starts."""


def _machine() -> str:
    return (
        f"{datetime.now(UTC):%Y-%m-%d}, commit {current_commit()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, {platform.system()} {platform.machine()}"
    )


def _suite(entry: str) -> tuple[str, Runner, str]:
    """(title, run function, notes) of a suite entry: ``module`` or ``module:function``."""
    name, _, function = entry.partition(":")
    module = importlib.import_module(name)
    if not function:
        run: Runner = module.run
        return (module.__doc__ or name).strip().splitlines()[0].rstrip("."), run, ""
    run = getattr(module, function)
    title, _, notes = inspect.cleandoc(run.__doc__ or entry).partition("\n")
    return title.rstrip("."), run, notes.strip()


def _markdown(title: str, rows: list[dict[str, Any]], notes: str = "", where: str = "") -> str:
    columns = list(dict.fromkeys(k for row in rows for k in row))
    lines = [f"## {title}", ""]
    if where:
        lines += [where, ""]
    lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(str(row.get(c, "")) for c in columns) + " |")
    if notes:
        lines += ["", notes]
    return "\n".join(lines) + "\n"


def _replace_sections(text: str, sections: dict[str, str]) -> str:
    """``text`` with each ``## title`` section replaced by ``sections[title]`` (or appended)."""
    out, done = [], set()
    for part in re.split(r"(?m)^(?=## )", text):
        title = part[3:].splitlines()[0].strip() if part.startswith("## ") else None
        if title in sections:
            out.append(sections[title])
            done.add(title)
        elif part.strip():
            out.append(part)
    out += [sections[t] for t in sections if t not in done]
    return "\n".join(part.rstrip("\n") + "\n" for part in out)


def _table(title: str, rows: list[dict[str, Any]]) -> Table:
    table = Table(title=title)
    columns = list(dict.fromkeys(k for row in rows for k in row))
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(str(row.get(c, "")) for c in columns))
    return table


def _run_suites(suites: list[str], quick: bool, where: str) -> tuple[dict[str, str], float]:
    """Run each suite, print its table and how long it took; (its markdown section by
    title, seconds in all)."""
    console = Console()
    sections: dict[str, str] = {}
    total = 0.0
    for entry in suites:
        title, run, notes = _suite(entry)
        title += QUICK_MARK if quick else ""
        started = time.perf_counter()
        rows = run(quick)
        took = time.perf_counter() - started
        total += took
        console.print(_table(title, rows))
        console.print(f"{entry}: {took:.0f} s")
        took_text = f"_This suite took {took:.0f} s._"
        sections[title] = _markdown(title, rows, notes, f"{where} {took_text}".strip())
    return sections, total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--out", default="BENCHMARKS.md", help="markdown file to write")
    parser.add_argument(
        "--only",
        action="append",
        metavar="WORD",
        help="run only suites whose entry contains WORD; update just their sections",
    )
    parser.add_argument(
        "--from-kept",
        action="store_true",
        help="make the tables of suites with kept results from what is kept; run nothing new",
    )
    args = parser.parse_args(argv)
    kept_results.RUN_NOTHING_NEW = args.from_kept
    out = Path(args.out)
    runnable = [
        s
        for s in SUITES
        if not (args.quick and s in FULL_ONLY) and (args.quick or s not in QUICK_ONLY)
    ]
    if args.only:
        suites = [s for s in runnable if any(w in s for w in args.only)]
        where = (
            f"_Measured by `python -m benchmarks{' --quick' if args.quick else ''}"
            f"{' --from-kept' if args.from_kept else ''} "
            f"--only {' --only '.join(args.only)}` on {_machine()}._"
        )
        sections, _ = _run_suites(suites, args.quick, where)
        text = _replace_sections(out.read_text() if out.exists() else "", sections)
        out.write_text(with_glance(text))
        Console().print(f"updated {len(sections)} section(s) of {args.out}")
        return 0
    sections, total = _run_suites(runnable, args.quick, "")
    measured = (
        f"measured by `make bench{'-quick' if args.quick else ''}` on {_machine()}, "
        f"in {total / 60:.1f} minutes."
    )
    text = out.read_text() if out.exists() else ""
    out.write_text(
        with_glance(_with_header(_replace_sections(text, sections), args.quick, measured))
    )
    Console().print(f"wrote {args.out}")
    return 0


def _with_header(text: str, quick: bool, measured: str) -> str:
    """``text`` with its header (what precedes the first section) saying ``measured`` for
    this kind of run and keeping what it says of the other kind."""
    head, _, rest = text.partition("\n## ")
    if not head.startswith("# Benchmarks"):  # no header yet: the text is all sections
        head, rest = "", text.removeprefix("## ")
    lines = {k: next((x for x in head.splitlines() if x.startswith(v)), None)
             for k, v in HEADER_LINES.items()}  # fmt: skip
    lines[quick] = HEADER_LINES[quick] + measured
    header = [
        "# Benchmarks",
        "",
        *(line for line in (lines[False], lines[True]) if line is not None),
        "Targets are goals, not assertions; a miss is reported here, not hidden.",
        "",
    ]
    return "\n".join(header) + ("\n## " + rest if rest else "")


if __name__ == "__main__":
    sys.exit(main())
