"""Kept search runs: a full search table resumes from the runs that finished."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks.bench_search import Plan, run_task, runs_to_do, task_rows
from benchmarks.kept import JsonLines, KeptResultsError
from benchmarks.search.protocol import RunResult, split_id, split_secret
from benchmarks.search.results import RunLog

from benchmarks import kept as kept_results

SPLIT = split_id(split_secret("synthetic"))


def _run(policy: str, seed: int, budget: int = 3, split: str = SPLIT) -> RunResult:
    return RunResult(
        policy, "synthetic", seed, budget, [0.5, None, 0.6], 0.61, 0.5, 1, 1, 2.5,
        {"lr": 0.01}, [True, True, False], commit="abc1234", split=split,
    )  # fmt: skip


def test_a_kept_run_reads_back_as_it_was_written(tmp_path: Path) -> None:
    log = RunLog(JsonLines(tmp_path / "results" / "synthetic.jsonl"))
    assert log.load(3, SPLIT) == {}  # no file yet: nothing kept
    log.append(_run("random", 1))
    log.append(_run("random", 2, budget=5))  # another plan's run: never mixed in
    log.append(_run("random", 3, split=""))  # a lab that drew its own split: nor this
    kept = log.load(3, SPLIT)
    assert list(kept) == [("random", 1)]
    assert kept[("random", 1)] == _run("random", 1)
    assert kept[("random", 1)].curve() == [0.5, 0.5, 0.5]  # the last one was not feasible


def test_a_corrupt_line_is_named_with_the_fix(tmp_path: Path) -> None:
    log = RunLog(JsonLines(tmp_path / "synthetic.jsonl"))
    log.append(_run("random", 1))
    with log.path.open("a") as out:
        out.write('{"policy": "random"}\n')  # a cut-off or hand-edited line
    with pytest.raises(KeptResultsError, match=r"synthetic\.jsonl:2 is not a kept result"):
        log.load(3, SPLIT)


@pytest.mark.timeout(300)
def test_a_search_resumes_from_its_kept_runs(tmp_path: Path) -> None:
    """The second call finds every run kept: it runs nothing (no baseline either)."""
    log = RunLog(JsonLines(tmp_path / "synthetic.jsonl"))
    plan = Plan(seeds=1, budget=2)
    first, baseline_s = run_task("synthetic", plan, ("random",), log=log)
    assert baseline_s > 0 and [r.policy for r in first] == ["random"]
    assert first[0].commit  # the commit it was measured at
    assert first[0].split == SPLIT  # every sitting splits the data alike
    again, baseline_again = run_task("synthetic", plan, ("random",), log=log)
    assert baseline_again == 0.0
    assert again == first
    assert len(log.path.read_text().splitlines()) == 1


def test_from_kept_makes_the_table_of_what_is_kept_and_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = RunLog(JsonLines(tmp_path / "synthetic.jsonl"))
    log.append(_run("random", 2))
    monkeypatch.setattr(kept_results, "RUN_NOTHING_NEW", True)
    runs, baseline_s = run_task("synthetic", Plan(seeds=3, budget=3), ("random",), log=log)
    assert runs == [_run("random", 2)] and baseline_s == 0.0
    rows = task_rows("synthetic", "quality", runs, Plan(seeds=3, budget=3))
    assert rows[0]["seeds x budget"] == "1 x 3 (partial: 3 planned)"


def test_runs_left_go_seed_by_seed_with_the_ablations_last() -> None:
    """A sitting cut short keeps runs that pair up across policies by seed."""
    policies = ("rsilab", "optuna-tpe", "random", "rsilab without Reviewers")
    done = {("rsilab", 1), ("rsilab", 2), ("optuna-tpe", 1)}
    assert runs_to_do(policies, 2, done) == [
        ("random", 1),
        ("optuna-tpe", 2),
        ("random", 2),
        ("rsilab without Reviewers", 1),
        ("rsilab without Reviewers", 2),
    ]


def test_named_seeds_schedule_those_seeds_and_no_other() -> None:
    """A registration of seeds 11 and 12 runs those two, not seeds 1 to 12."""
    assert runs_to_do(("rsilab", "random"), [11, 12], set()) == [
        ("rsilab", 11),
        ("random", 11),
        ("rsilab", 12),
        ("random", 12),
    ]


def test_a_search_on_named_seeds_returns_only_their_kept_runs(tmp_path: Path) -> None:
    log = RunLog(JsonLines(tmp_path / "synthetic.jsonl"))
    for seed in (1, 11, 12):
        log.append(_run("random", seed))
    runs, baseline_s = run_task(
        "synthetic", Plan(seeds=2, budget=3), ("random",), log=log, seeds=[11, 12]
    )
    assert runs == [_run("random", 11), _run("random", 12)] and baseline_s == 0.0
