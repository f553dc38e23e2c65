"""The team comparison table: rows paired with independent researchers by seed."""

from __future__ import annotations

from benchmarks.bench_search import Plan
from benchmarks.bench_teams import team_rows
from benchmarks.search.protocol import TEAM_MODES, RunResult


def _run(mode: str, seed: int, final: float) -> RunResult:
    return RunResult(
        mode, "synthetic", seed, 3, [0.5, 0.6, 0.55], final, 0.5, int(final > 0.5), 1, 30.0,
        commit="abc1234",
    )  # fmt: skip


def test_each_mode_is_compared_with_independent_researchers_by_seed() -> None:
    independent, shared, full = TEAM_MODES
    runs = [
        _run(independent, 1, 0.50), _run(independent, 2, 0.55),
        _run(shared, 1, 0.52), _run(shared, 2, 0.50),
        _run(full, 1, 0.60),
    ]  # fmt: skip
    rows = {r["team of 3"]: r for r in team_rows("synthetic", runs, Plan(seeds=2, budget=3))}
    assert list(rows) == ["independent", "shared memory", "memory + orientations"]
    assert rows["independent"]["mode - independent [95% CI]"] == "-"
    assert rows["shared memory"]["W/T/L (sign p)"].startswith("1/0/1")
    assert rows["memory + orientations"]["seeds x budget"] == "1 x 3 (partial: 2 planned)"
    assert rows["memory + orientations"]["mode - independent [95% CI]"].startswith("+0.100")
    assert rows["shared memory"]["runs accepted"] == "1/2"
