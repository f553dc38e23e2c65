"""Configs scored with many seeds outside the alpha budget (benchmarks/search/many_seeds.py) and
the table that reads them (benchmarks/bench_many_seeds.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks.bench_many_seeds import PolicyScores, rows_for
from benchmarks.bench_protocol import TaskPlan
from benchmarks.search.many_seeds import Scored, ScoreLog, config_scorer, scoring_seeds
from benchmarks.search.protocol import RunResult, split_id, split_secret

from rsilab.controller.evaluation import controller_seeds
from rsilab.tasks import get_task


def test_scoring_seeds_are_shared_prefixes_and_none_is_a_controller_seed() -> None:
    ten = scoring_seeds("digits", 10)
    assert len(set(ten)) == 10
    assert scoring_seeds("digits", 4) == ten[:4]
    assert scoring_seeds("textcls", 10) != ten
    secret = split_secret("digits")
    judged = set(controller_seeds(secret, "baseline/digits/main", 36))
    judged |= set(controller_seeds(secret, "candidate/digits/main/1", 36))
    assert not judged & set(ten)


def test_a_config_is_trained_and_scored_on_the_final_tier_with_its_knobs() -> None:
    with config_scorer(get_task("digits")) as scorer:
        good = scorer.score({"lr": 0.01, "optimizer": "adam", "epochs": 30}, 1)
        again = scorer.score({"lr": 0.01, "optimizer": "adam", "epochs": 30}, 1)
        bad = scorer.score({"lr": 1e-5, "epochs": 1}, 1)
        with pytest.raises(ValueError, match="no knob depth"):
            scorer.score({"depth": 3}, 1)
    # a trained MLP on digits is far above chance (10 classes); one epoch at lr 1e-5 is not
    assert good.scores[0] > 0.8 and bad.scores[0] < 0.3
    assert again.scores == good.scores  # same config, same seed: the same score
    assert good.seeds == scoring_seeds("digits", 1)
    assert good.split == split_id(split_secret("digits"))


def test_a_task_without_a_config_file_cannot_be_scored_by_config() -> None:
    with config_scorer(get_task("kernel")) as scorer, pytest.raises(ValueError, match="config"):
        scorer.score({}, 1)


def test_kept_scores_are_read_by_config_and_seed_count(tmp_path: Path) -> None:
    log = ScoreLog("digits", root=tmp_path)
    split = split_id(split_secret("digits"))
    log.append(Scored("digits", {"b": 1, "a": 2}, [7, 8], [0.5, 0.7], split))
    log.append(Scored("digits", {"a": 2, "b": 1}, [7], [0.9], split))
    log.append(Scored("digits", {"a": 3}, [7, 8], [0.1, 0.1], "another-split"))
    kept = log.load(2)
    assert list(kept) == ['{"a":2,"b":1}']
    assert kept['{"a":2,"b":1}'].mean == pytest.approx(0.6)
    assert next(iter(log.load(1).values())).scores == [0.9]
    line = json.loads((tmp_path / "search" / "digits-many-seeds.jsonl").read_text().splitlines()[0])
    assert line["config"] == {"b": 1, "a": 2} and line["scores"] == [0.5, 0.7]


def _run(
    policy: str, seed: int, final: float, head: dict[str, int], best: dict[str, int]
) -> RunResult:
    return RunResult(
        policy, "digits", seed, 24, [0.5], final, 0.4, 1, 1, 1.0,
        best_config=best, head_config=head,
    )  # fmt: skip


def test_the_table_pairs_heads_by_seed_and_says_what_was_not_recorded() -> None:
    plan = TaskPlan("digits", [1, 2, 3], 24, ["rsilab", "peer"])
    mine = [_run("rsilab", s, 0.9, {"x": s}, {}) for s in (1, 2, 3)]
    theirs = [_run("peer", s, 0.95, {"y": s}, {"y": s} if s < 3 else {"z": 1}) for s in (1, 2, 3)]
    scores = {
        "rsilab": PolicyScores(mine, {1: 0.80, 2: 0.90, 3: 0.70}, {}),
        "peer": PolicyScores(theirs, {1: 0.75, 2: 0.80, 3: 0.75}, {1: 0.75, 2: 0.80, 3: 0.60}),
    }
    rows = {row["policy"]: row for row in rows_for(plan, scores, "rsilab")}
    # per seed +0.05, +0.10, -0.05: mean +0.033, two wins and a loss
    assert rows["peer"]["rsilab - policy, heads [95% CI]"].startswith("+0.033")
    assert rows["peer"]["W/T/L"] == "2/0/1"
    assert rows["peer"]["runs whose head is their best"] == "2/3"
    assert rows["rsilab"]["best dev config [95% CI]"] == "not recorded"
    assert rows["rsilab"]["head [95% CI]"].startswith("0.800")
    assert rows["rsilab"]["head at the run's end, controller's seeds"].startswith("0.900")
    partial = {**scores, "rsilab": PolicyScores(mine, {1: 0.8}, {})}
    assert rows_for(plan, partial, "rsilab")[0]["head [95% CI]"] == "1 of 3 scored yet"
