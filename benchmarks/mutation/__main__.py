"""``python -m benchmarks.mutation``: run mutmut and the data mutants, keep the verdicts.

Writes :data:`benchmarks.mutation.RESULTS` (``--group NAME`` reruns one group and keeps the
others' verdicts; ``--no-data`` skips the table mutants) and prints each survivor's diff.
``make mutate`` runs this, then writes the table into ``BENCHMARKS.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime
from typing import Any

from benchmarks import current_commit
from benchmarks.mutation import RESULTS, explained
from benchmarks.mutation._data import data_mutants, run_data_mutants
from benchmarks.mutation._mutmut import SCRATCH, run_group
from benchmarks.mutation.groups import GROUPS


def _data(workers: int) -> dict[str, Any]:
    started = time.perf_counter()
    tables: dict[str, dict[str, Any]] = {}
    for mutant, verdict, _ in run_data_mutants(data_mutants(), workers, SCRATCH / "data-logs"):
        row = tables.setdefault(mutant.table, {"mutants": 0, "killed": 0, "survivors": []})
        row["mutants"] += 1
        if verdict == "killed":
            row["killed"] += 1
        else:
            row["survivors"].append(f"{mutant.name}: {verdict}")
    return {"tables": tables, "seconds": round(time.perf_counter() - started, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mutation")
    parser.add_argument("--group", action="append", help="run only this group (repeatable)")
    parser.add_argument("--no-data", action="store_true", help="skip the table mutants")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args(argv)
    known = {g.name for g in GROUPS}
    unknown = set(args.group or ()) - known
    if unknown:
        parser.error(f"unknown group(s) {sorted(unknown)}; known: {sorted(known)}")
    kept = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    by_name = {g["group"]: g for g in kept.get("groups", [])}
    started = time.perf_counter()
    for group in GROUPS:
        if args.group and group.name not in args.group:
            continue
        print(f"mutating {group.name}: {', '.join(group.modules)}", flush=True)
        result = run_group(group, args.workers)
        by_name[group.name] = {
            "group": result.group,
            "modules": result.modules,
            "tests": result.tests,
            "counts": result.counts,
            "survivors": result.survivors,
            "seconds": round(result.seconds, 1),
        }
        print(f"  {result.counts} in {result.seconds:.0f} s", flush=True)
    data = kept.get("data")
    if not args.no_data and not args.group:
        print("mutating the security tables", flush=True)
        data = _data(args.workers)
    seconds = time.perf_counter() - started
    kept = {
        "command": "make mutate",
        "date": f"{datetime.now(UTC):%Y-%m-%d}",
        "commit": current_commit(),
        "cpus": os.cpu_count(),
        "workers": args.workers,
        "seconds": round(seconds, 1) if not args.group else kept.get("seconds"),
        "groups": [by_name[g.name] for g in GROUPS if g.name in by_name],
        "data": data,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n")
    _print_survivors(kept)
    print(f"wrote {RESULTS.relative_to(RESULTS.parents[2])} ({seconds / 60:.1f} minutes)")
    return 0


def _print_survivors(kept: dict[str, Any]) -> None:
    for group in kept["groups"]:
        for name, diff in sorted(group["survivors"].items()):
            why = explained(name, diff)
            print(f"\n{name} ({'equivalent: ' + why if why else 'SURVIVED'})\n{diff}")
    for table, row in sorted((kept.get("data") or {}).get("tables", {}).items()):
        for survivor in row["survivors"]:
            print(f"\n{table}: {survivor} (SURVIVED)")


if __name__ == "__main__":
    sys.exit(main())
