"""Numbers in reviews are reconciled with the records (reporting-stage guard)."""

from __future__ import annotations

import pytest

from rsilab.expos.reconcile import reported_numbers, unreconciled_numbers
from rsilab.records import Metric, MetricSource, ProtocolFlag, Role
from tests.expos.helpers import Bench


def test_score_like_numbers_are_found_and_counts_ignored() -> None:
    found = reported_numbers("3 seeds, epoch 10: accuracy 0.873 (+0.05), 87.3% of samples; v2.1x")
    assert [n.text for n in found] == ["0.873", "+0.05", "87.3%"]
    assert found[2].value == pytest.approx(0.873)


def test_a_number_that_ends_a_sentence_is_found() -> None:
    text = "Dev quality reached 0.991. Then 87.3%. Release 2.1.3 and 0.5.x are no scores."
    assert [n.text for n in reported_numbers(text)] == ["0.991", "87.3%"]
    assert [n.text for n in reported_numbers("it ended at 0.75")] == ["0.75"]


def test_rounding_is_allowed_and_inventions_are_not() -> None:
    known = [0.87123, -0.0512]
    assert unreconciled_numbers("reached 0.87, effect 0.05 and 87.1%", known) == []
    assert [n.text for n in unreconciled_numbers("reached 0.91 and 0.872", known)] == [
        "0.91",
        "0.872",
    ]


def _measured(bench: Bench, experiment_id: str, value: float) -> None:
    """Record ``value`` as a controller-produced dev metric of the experiment (what a dev_eval
    job's evaluation leaves), written by a principal as the job records are."""
    exp = bench.get_experiment(experiment_id)
    metric = Metric(name="accuracy", value=value, source=MetricSource.CONTROLLER)
    bench.put(exp.model_copy(update={"metrics": [*exp.metrics, metric]}))


def test_a_review_citing_an_invented_score_is_kept_and_flagged(bench: Bench) -> None:
    direction = bench.direction()
    a, b = bench.experiment(direction), bench.experiment(direction)
    _measured(bench, a, 0.8125)
    _measured(bench, b, 0.75)
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


def test_a_number_the_agent_logged_itself_does_not_reconcile(bench: Bench) -> None:
    """log_metric records what an agent says; citing it back is still a made-up number."""
    direction = bench.direction()
    a, b, c, d = (bench.experiment(direction) for _ in range(4))
    _measured(bench, a, 0.8125)
    bench.log(a, 0.991)
    cited = bench.ok(
        Role.REVIEWER,
        "submit_review",
        {"experiment_ids": [a], "rationale": "dev 0.81 measured, 0.991 reached"},
    )
    assert cited["flagged_numbers"] == ["0.991"]
    # a comparison the tool computes from agent-reported values reconciles nothing either
    for exp, value in ((a, 0.99), (b, 0.98), (c, 0.5), (d, 0.52)):
        bench.log(exp, value, name="claimed")
    compared = bench.ok(
        Role.REVIEWER,
        "submit_review",
        {
            "experiment_ids": [a, b],
            "baseline_ids": [c, d],
            "metric": "claimed",
            "rationale": "a gain of 0.475",
        },
    )
    assert compared["flagged_numbers"] == ["0.475"]


def test_a_comparison_of_measured_values_reconciles(bench: Bench) -> None:
    direction = bench.direction()
    a, b, c, d = (bench.experiment(direction) for _ in range(4))
    for exp, value in ((a, 0.9), (b, 0.8), (c, 0.5), (d, 0.6)):
        _measured(bench, exp, value)
    out = bench.ok(
        Role.REVIEWER,
        "submit_review",
        {
            "experiment_ids": [a, b],
            "baseline_ids": [c, d],
            "metric": "accuracy",
            "rationale": "0.85 against 0.55: a gain of 0.30",
        },
    )
    assert "flagged_numbers" not in out
