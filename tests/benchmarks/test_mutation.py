"""``make mutate``'s pieces that run without mutating anything: the table it writes, the data
mutants it makes, and how survivors are matched with their explanation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks.mutation import function_of
from benchmarks.mutation._data import data_mutants
from benchmarks.mutation.groups import GROUPS

from benchmarks import bench_mutation

ROOT = Path(__file__).resolve().parents[2]


def test_groups_name_files_that_exist() -> None:
    for group in GROUPS:
        for path in group.modules + group.tests:
            assert (ROOT / path).is_file(), path


def test_the_issues_surviving_mutants_are_among_the_data_mutants() -> None:
    names = {(m.table, m.name) for m in data_mutants()}
    assert ("TOOL_ROLES", "propose_candidate granted to reviewer") in names
    assert ("TOOL_ROLES", "propose_candidate granted to main") in names
    assert ("WORKSPACE_RESERVED", "runs dropped") in names
    assert ("SOCKET_MODE", "rsilab.mcp.llm_relay = 0o666") in names
    assert sum(1 for table, _ in names if table == "TOOL_ROLES") == 39 * 6


def test_mutant_names_map_to_their_function() -> None:
    assert function_of("rsilab.expos.policy.x_may_call__mutmut_3") == "rsilab.expos.policy.may_call"
    assert (
        function_of("rsilab.store.ledger.xǁVerifyReportǁfail__mutmut_1")
        == "rsilab.store.ledger.VerifyReport.fail"
    )


def test_the_table_reads_the_kept_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kept = {
        "command": "make mutate",
        "date": "2026-12-02",
        "commit": "abc1234",
        "workers": 2,
        "seconds": 300.0,
        "groups": [
            {
                "group": "acceptance",
                "modules": ["src/rsilab/controller/acceptance.py"],
                "tests": ["tests/controller/test_acceptance.py"],
                "counts": {"killed": 9, "survived": 1},
                "survivors": {"rsilab.controller.acceptance.x_decide__mutmut_1": "- a\n+ b"},
                "seconds": 12.0,
            }
        ],
        "data": {"tables": {"TOOL_ROLES": {"mutants": 4, "killed": 4, "survivors": []}}},
    }
    results = tmp_path / "mutation.json"
    results.write_text(json.dumps(kept))
    monkeypatch.setattr(bench_mutation, "RESULTS", results)
    rows = bench_mutation.run_mutation(False)
    assert rows[0]["module"] == "controller/acceptance.py"
    assert (rows[0]["mutants"], rows[0]["killed"], rows[0]["killed %"]) == (10, 9, "90.0%")
    assert rows[0]["target"] == ">= 90% killed: met"
    assert (rows[1]["module"], rows[1]["killed %"]) == ("table TOOL_ROLES", "100.0%")
    assert rows[-1]["module"].startswith("all (make mutate on 2026-12-02, commit abc1234")
    assert (rows[-1]["mutants"], rows[-1]["killed"]) == (14, 13)
    monkeypatch.setattr(bench_mutation, "RESULTS", tmp_path / "none.json")
    assert "make mutate" in bench_mutation.run_mutation(False)[0]["module"]
