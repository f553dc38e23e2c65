"""Review management tools: effects computed from the records, never taken from the reviewer."""

from __future__ import annotations

import math
import statistics

import pytest
from scipy.stats import t as student_t

from rsilab.records import Metric, MetricSource, Review, Role
from tests.expos.helpers import Bench


def _group(bench: Bench, direction: str, values: list[float], name: str = "accuracy") -> list[str]:
    ids = []
    for value in values:
        exp = bench.experiment(direction)
        bench.log(exp, value - 1.0, name=name)  # an earlier value that is not the last
        bench.log(exp, value, name=name)
        bench.log(exp, 99.0, name=name, split="train")  # train values are not compared
        ids.append(exp)
    return ids


def _welch(a: list[float], b: list[float]) -> tuple[float, float, float]:
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    dof = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    diff = sum(a) / len(a) - sum(b) / len(b)
    half = float(student_t.ppf(0.975, dof)) * math.sqrt(va + vb)
    return diff, diff - half, diff + half


def test_submit_review_computes_a_welch_interval(any_bench: Bench) -> None:
    bench = any_bench
    direction = bench.direction()
    a_vals, b_vals = [0.81, 0.84, 0.86, 0.83], [0.78, 0.80, 0.77]
    treated, control = _group(bench, direction, a_vals), _group(bench, direction, b_vals)
    value = bench.ok(
        Role.REVIEWER,
        "submit_review",
        {
            "experiment_ids": treated,
            "baseline_ids": control,
            "metric": "accuracy",
            "verdict": "supports",
            "recommendation": "verify",
            "rationale": "better on dev",
            "direction_id": direction,
        },
    )
    [comparison] = value["comparisons"]
    diff, low, high = _welch(a_vals, b_vals)
    assert comparison["effect"]["value"] == pytest.approx(diff)
    assert comparison["effect"]["low"] == pytest.approx(low)
    assert comparison["effect"]["high"] == pytest.approx(high)
    assert comparison["effect"]["level"] == 0.95
    assert comparison["a_mean"] == pytest.approx(statistics.fmean(a_vals))
    assert comparison["b_mean"] == pytest.approx(statistics.fmean(b_vals))
    assert (comparison["n_a"], comparison["n_b"]) == (4, 3)
    assert comparison["a_ids"] == treated and comparison["b_ids"] == control
    review = bench.store.get_as(value["id"], Review)
    assert review.reviewer == "reviewer-1" and review.campaign_id == bench.campaign.id
    assert review.experiment_ids == treated + control
    assert review.comparisons[0].model_dump(mode="json") == comparison
    assert (review.verdict, review.recommendation) == ("supports", "verify")
    bench.assert_verifies()


def test_identical_values_give_a_zero_width_interval(any_bench: Bench) -> None:
    bench = any_bench
    direction = bench.direction()
    a, b = _group(bench, direction, [0.5, 0.5]), _group(bench, direction, [0.4, 0.4])
    value = bench.ok(
        Role.REVIEWER,
        "submit_review",
        {"experiment_ids": a, "baseline_ids": b, "metric": "accuracy"},
    )
    effect = value["comparisons"][0]["effect"]
    assert effect["low"] == effect["high"] == effect["value"] == pytest.approx(0.1)


def _measured(bench: Bench, experiment_id: str, value: float) -> None:
    """A controller dev value of accuracy, written as the job records write it."""
    exp = bench.get_experiment(experiment_id)
    metric = Metric(name="accuracy", value=value, source=MetricSource.CONTROLLER)
    bench.put(exp.model_copy(update={"metrics": [*exp.metrics, metric]}))


def test_a_comparison_reads_the_controllers_value_over_a_later_logged_one(
    any_bench: Bench,
) -> None:
    bench = any_bench
    direction = bench.direction()
    a1, a2, b1, b2 = (bench.experiment(direction) for _ in range(4))
    for exp, value in ((a1, 0.9), (a2, 0.8), (b1, 0.5), (b2, 0.6)):
        _measured(bench, exp, value)
        bench.log(exp, 0.99)  # logged after the controller's value: it does not displace it
    out = bench.ok(
        Role.REVIEWER,
        "submit_review",
        {
            "experiment_ids": [a1, a2],
            "baseline_ids": [b1, b2],
            "metric": "accuracy",
            "rationale": "0.85 against 0.55: a gain of 0.30",
        },
    )
    [comparison] = out["comparisons"]
    assert comparison["a_mean"] == pytest.approx(0.85)
    assert comparison["b_mean"] == pytest.approx(0.55)
    assert comparison["effect"]["value"] == pytest.approx(0.30)
    assert "flagged_numbers" not in out  # computed wholly from controller values: they count


def test_a_workers_number_stands_in_only_where_the_controller_has_none(
    any_bench: Bench,
) -> None:
    bench = any_bench
    direction = bench.direction()
    a1, a2, b1, b2 = (bench.experiment(direction) for _ in range(4))
    for exp, value in ((a1, 0.9), (b1, 0.5), (b2, 0.6)):
        _measured(bench, exp, value)
    bench.log(a2, 0.7)
    out = bench.ok(
        Role.REVIEWER,
        "submit_review",
        {
            "experiment_ids": [a1, a2],
            "baseline_ids": [b1, b2],
            "metric": "accuracy",
            "rationale": "a gain of 0.25",
        },
    )
    [comparison] = out["comparisons"]
    assert comparison["a_mean"] == pytest.approx(0.8)
    assert comparison["effect"]["value"] == pytest.approx(0.25)
    assert out["flagged_numbers"] == ["0.25"]  # a2's value is the worker's: it never counts


def test_groups_with_fewer_than_two_values_are_refused(any_bench: Bench) -> None:
    bench = any_bench
    direction = bench.direction()
    a = _group(bench, direction, [0.5, 0.6])
    lone = _group(bench, direction, [0.4])
    silent = bench.experiment(direction)  # logged nothing
    for baseline in ([*lone], [*lone, silent]):
        error = bench.fail(
            Role.REVIEWER,
            "submit_review",
            {"experiment_ids": a, "baseline_ids": baseline, "metric": "accuracy"},
            code="invalid_arguments",
        )
        assert error.field == "metric"
        assert "found 2 and 1" in error.message
    bench.fail(
        Role.REVIEWER,
        "submit_review",
        {"experiment_ids": a, "baseline_ids": a, "metric": "f1"},
        code="invalid_arguments",
    )
    error = bench.fail(
        Role.REVIEWER,
        "submit_review",
        {"experiment_ids": a, "metric": "accuracy"},
        code="invalid_arguments",
    )
    assert error.field == "baseline_ids"
    assert bench.store.query(Review.KIND) == []


def test_review_without_a_metric(any_bench: Bench) -> None:
    bench = any_bench
    exp = bench.experiment(bench.direction())
    value = bench.ok(Role.REVIEWER, "submit_review", {"experiment_ids": [exp]})
    assert value["comparisons"] == []
    review = bench.store.get_as(value["id"], Review)
    assert (review.verdict, review.recommendation) == ("inconclusive", "continue")


def test_review_refuses_bad_references(any_bench: Bench) -> None:
    bench = any_bench
    direction = bench.direction()
    exp = bench.experiment(direction)
    error = bench.fail(
        Role.REVIEWER,
        "submit_review",
        {"experiment_ids": [exp, "exp-000000000000"]},
        code="not_found",
    )
    assert error.field == "experiment_ids.1"
    error = bench.fail(
        Role.REVIEWER,
        "submit_review",
        {"experiment_ids": [exp], "direction_id": exp},
        code="not_found",
    )
    assert error.field == "direction_id"
    bench.fail(Role.REVIEWER, "submit_review", {"experiment_ids": []}, code="invalid_arguments")
    bench.fail(
        Role.REVIEWER,
        "submit_review",
        {"experiment_ids": [exp], "verdict": "great"},
        code="invalid_arguments",
    )
    bench.fail(Role.WORKER, "submit_review", {"experiment_ids": [exp]}, code="permission_denied")


def test_list_and_inspect_reviews(any_bench: Bench) -> None:
    bench = any_bench
    d1, d2 = bench.direction("one"), bench.direction("two")
    e1, e2 = bench.experiment(d1), bench.experiment(d2)
    r1 = bench.ok(
        Role.REVIEWER,
        "submit_review",
        {
            "experiment_ids": [e1],
            "direction_id": d1,
            "verdict": "refutes",
            "recommendation": "stop",
        },
    )["id"]
    r2 = bench.ok(Role.REVIEWER, "submit_review", {"experiment_ids": [e1, e2]})["id"]
    listed = bench.ok(Role.MAIN, "list_reviews")["reviews"]
    assert [r["id"] for r in listed] == [r1, r2]
    assert (listed[0]["verdict"], listed[0]["recommendation"]) == ("refutes", "stop")
    assert [
        r["id"] for r in bench.ok(Role.MAIN, "list_reviews", {"direction_id": d1})["reviews"]
    ] == [r1]
    assert [
        r["id"] for r in bench.ok(Role.MAIN, "list_reviews", {"experiment_id": e2})["reviews"]
    ] == [r2]
    review = bench.ok(Role.WORKER, "inspect_review", {"review_id": r1})["review"]
    assert review == bench.store.get_as(r1, Review).model_dump(mode="json")
    error = bench.fail(Role.MAIN, "inspect_review", {"review_id": e1}, code="not_found")
    assert error.field == "review_id"
    other = bench.ctx(Role.MAIN, campaign_id=bench.other_campaign().id)
    assert bench.ok(other, "list_reviews")["reviews"] == []
    result = bench.call(other, "inspect_review", {"review_id": r1})
    assert result.error is not None and result.error.code == "guard_refused"


def test_values_too_large_to_compare_are_refused(any_bench: Bench) -> None:
    bench = any_bench
    direction = bench.direction()
    a = _group(bench, direction, [1e308, -1e308])
    b = _group(bench, direction, [1e308, 1.7e308])
    error = bench.fail(
        Role.REVIEWER,
        "submit_review",
        {"experiment_ids": a, "baseline_ids": b, "metric": "accuracy"},
        code="invalid_arguments",
    )
    assert error.field == "metric" and "too large" in error.message
    assert bench.store.query(Review.KIND) == []
    assert bench.ok(Role.MAIN, "list_reviews") == {"reviews": []}
    bench.assert_verifies()
