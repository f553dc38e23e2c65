"""Numbers in reviews are reconciled with the records (reporting-stage guard)."""

from __future__ import annotations

import pytest

from rsilab.expos.reconcile import reported_numbers, unreconciled_numbers
from rsilab.records import ProtocolFlag, Role
from tests.expos.helpers import Bench


def test_score_like_numbers_are_found_and_counts_ignored() -> None:
    found = reported_numbers("3 seeds, epoch 10: accuracy 0.873 (+0.05), 87.3% of samples; v2.1x")
    assert [n.text for n in found] == ["0.873", "+0.05", "87.3%"]
    assert found[2].value == pytest.approx(0.873)


def test_rounding_is_allowed_and_inventions_are_not() -> None:
    known = [0.87123, -0.0512]
    assert unreconciled_numbers("reached 0.87, effect 0.05 and 87.1%", known) == []
    assert [n.text for n in unreconciled_numbers("reached 0.91 and 0.872", known)] == [
        "0.91",
        "0.872",
    ]


def test_a_review_citing_an_invented_score_is_kept_and_flagged(bench: Bench) -> None:
    direction = bench.direction()
    a, b = bench.experiment(direction), bench.experiment(direction)
    bench.log(a, 0.8125)
    bench.log(b, 0.75)
    honest = bench.ok(
        Role.REVIEWER, "submit_review", {"experiment_ids": [a, b], "rationale": "0.81 vs 0.75"}
    )
    assert "flagged_numbers" not in honest
    made_up = bench.ok(
        Role.REVIEWER,
        "submit_review",
        {"experiment_ids": [a], "rationale": "a reaches 0.93, clearly the best"},
    )
    assert made_up["flagged_numbers"] == ["0.93"]
    flags = bench.store.query_as(ProtocolFlag)
    assert [(f.stage, f.rule, f.blocked) for f in flags] == [
        ("reporting", "unreconciled_number", False)
    ]
    assert made_up["id"] in flags[0].detail
