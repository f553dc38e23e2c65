"""Mutation testing: the share of small deliberate bugs the tests catch, per module."""

from __future__ import annotations

import json
from typing import Any

from benchmarks.mutation import RESULTS, explained
from benchmarks.mutation.groups import TARGET


def _rate(killed: int, total: int) -> str:
    return f"{100 * killed / total:.1f}%" if total else "-"


def _verdict(killed: int, total: int) -> str:
    if not total:
        return "no mutants"
    return "met" if killed >= TARGET * total else "MISSED"


def _group_row(group: dict[str, Any]) -> dict[str, Any]:
    counts: dict[str, int] = group["counts"]
    total = sum(counts.values())
    killed = counts.get("killed", 0)
    survivors = group["survivors"]
    equivalent = sum(1 for name, diff in survivors.items() if explained(name, diff))
    return {
        "module": ", ".join(m.removeprefix("src/rsilab/") for m in group["modules"]),
        "mutants": total,
        "killed": killed,
        "survived": counts.get("survived", 0),
        "equivalent (explained)": equivalent,
        "other": total - killed - counts.get("survived", 0),
        "killed %": _rate(killed, total),
        "killed % of non-equivalent": _rate(killed, total - equivalent),
        "tests": ", ".join(t.removeprefix("tests/") for t in group["tests"]),
        "seconds": group["seconds"],
        "target": f">= {TARGET:.0%} killed: {_verdict(killed, total)}",
    }


def _table_row(table: str, row: dict[str, Any]) -> dict[str, Any]:
    total, killed = row["mutants"], row["killed"]
    errors = sum(1 for s in row["survivors"] if ": error" in s)
    return {
        "module": f"table {table}",
        "mutants": total,
        "killed": killed,
        "survived": total - killed - errors,
        "equivalent (explained)": 0,
        "other": errors,
        "killed %": _rate(killed, total),
        "killed % of non-equivalent": _rate(killed, total),
        "tests": "",
        "seconds": "",
        "target": f">= {TARGET:.0%} killed: {_verdict(killed, total)}",
    }


def run_mutation(quick: bool) -> list[dict[str, Any]]:
    """Mutation testing of the security- and decision-critical code: mutants killed per module.

    Read from `benchmarks/results/mutation.json`, which `make mutate` writes (this suite
    runs nothing). mutmut mutates the code inside functions of each module and runs, for each
    mutant, the named tests that call the changed function; the *table* rows are mutants of
    the module-level tables mutmut cannot reach (each role x tool and agent role x record kind
    cell flipped, each reserved folder, weights suffix and verified record type dropped, the
    non-target level and the socket modes changed), run in a forked child against their tests.
    *other* counts timeouts, mutants no test reached and runs that ended in an error (tried
    twice). Survivors that no test can tell from the code are listed with the reason in
    `benchmarks/mutation/groups.py` (EQUIVALENT).
    """
    if not RESULTS.exists():
        return [{"module": "no mutation run kept: run `make mutate`"}]
    kept = json.loads(RESULTS.read_text())
    rows = [_group_row(g) for g in kept["groups"]]
    tables = (kept.get("data") or {}).get("tables", {})
    rows += [_table_row(t, r) for t, r in sorted(tables.items())]
    total = sum(r["mutants"] for r in rows)
    killed = sum(r["killed"] for r in rows)
    minutes = f"{kept['seconds'] / 60:.1f} min" if kept.get("seconds") else "-"
    rows.append(
        {
            "module": (
                f"all ({kept['command']} on {kept['date']}, commit {kept['commit']}, "
                f"{kept['workers']} workers, {minutes})"
            ),
            "mutants": total,
            "killed": killed,
            "killed %": _rate(killed, total),
            "target": f">= {TARGET:.0%} killed: {_verdict(killed, total)}",
        }
    )
    return rows
