"""The Self/Teacher rounds table: rows from kept evolutions, and resuming from them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from benchmarks.bench_rounds import Evolved, _load, round_rows
from benchmarks.kept import JsonLines, KeptResultsError
from benchmarks.search.protocol import split_id, split_secret

SPLIT = split_id(split_secret("policy"))


def _evolved(improver: str, seed: int, target: list[float], accepted: list[bool]) -> Evolved:
    own = [target[0]] * (len(target) - 1) if improver == "teacher" else target[:-1]
    return Evolved(
        improver, seed, len(target) - 1, target, [0.3] * len(target), list(own), accepted,
        12.0, "abc1234", SPLIT, "finished",
    )  # fmt: skip


def test_rows_pair_self_with_teacher_by_seed_and_show_the_improvers_own_score() -> None:
    runs = [
        _evolved("self", 1, [0.40, 0.45, 0.50], [True, True]),
        _evolved("self", 2, [0.40, 0.44, 0.44], [True, False]),
        _evolved("teacher", 1, [0.40, 0.45, 0.46], [True, True]),
        _evolved("teacher", 2, [0.40, 0.43, 0.43], [True, False]),
    ]
    rows = {(r["improver"], r["round"]): r for r in round_rows(runs, seeds=2, rounds=2)}
    assert len(rows) == 6
    last = rows[("self", 2)]
    assert last["accepted"] == "1/2" and last["seeds"] == "2 of 2"
    assert last["change vs start"].startswith("+0.070")
    assert last["improver's own score"].startswith("0.445")  # the heads round 2 started from
    assert rows[("teacher", 2)]["improver's own score"].startswith("0.400")  # frozen start
    assert last["self - teacher (W/T/L)"].endswith("(2/0/0)")
    assert rows[("self", 0)]["change vs start"] == "-"


def test_kept_evolutions_of_another_plan_or_split_are_not_mixed_in(tmp_path: Path) -> None:
    kept = JsonLines(tmp_path / "policy.jsonl")
    mine = _evolved("self", 1, [0.4, 0.5, 0.5], [True, False])
    kept.append(dataclasses.asdict(mine))
    kept.append(dataclasses.asdict(_evolved("self", 2, [0.4, 0.5], [True])))  # one round
    kept.append(dataclasses.asdict(dataclasses.replace(mine, seed=3, split="")))
    assert _load(kept, rounds=2) == {("self", 1): mine}
    with kept.path.open("a") as out:
        out.write('{"improver": "self"}\n')
    with pytest.raises(KeptResultsError, match=r"policy\.jsonl:4"):
        _load(kept, rounds=2)
