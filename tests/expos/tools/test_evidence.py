"""Research and evidence tools: search, lineage, side-by-side comparison."""

from __future__ import annotations

from rsilab.records import (
    Evaluation,
    ExperimentState,
    Metric,
    MetricSource,
    ProtocolFlag,
    Role,
    SystemVersion,
)
from tests.expos.helpers import Bench


def test_search_by_text_kind_and_fields(any_bench: Bench) -> None:
    bench = any_bench
    direction = bench.direction("Dropout sweep")
    a = bench.experiment(direction, "try Dropout 0.1")
    b = bench.experiment(direction, "try weight decay")
    bench.finish(b)
    found = bench.ok(Role.WORKER, "search_records", {"text": "dropout"})["records"]
    assert [r["id"] for r in found] == [direction, a]  # case-insensitive, oldest first
    found = bench.ok(Role.WORKER, "search_records", {"text": "dropout", "kind": "experiment"})
    assert [r["id"] for r in found["records"]] == [a] and found["count"] == 1
    found = bench.ok(
        Role.REVIEWER, "search_records", {"kind": "experiment", "fields": {"state": "succeeded"}}
    )
    assert [r["id"] for r in found["records"]] == [b]
    assert found["records"][0]["kind"] == "experiment"
    assert found["records"][0]["summary"].startswith(b)
    limited = bench.ok(Role.WORKER, "search_records", {"limit": 2})["records"]
    assert len(limited) == 2


def test_search_leaves_out_what_the_caller_may_not_read(any_bench: Bench) -> None:
    bench = any_bench
    bench.direction("visible needle")
    other = bench.ctx(Role.MAIN, campaign_id=bench.other_campaign().id)
    bench.ok(other, "create_direction", {"title": "foreign needle", "hypothesis": "h"})
    bench.put(
        Evaluation(
            campaign_id=bench.campaign.id,
            benchmark="needle",
            tier="accept",
            subject_id="ver-000000000000",
            metric="acc",
        )
    )
    bench.put(
        Evaluation(
            campaign_id=bench.campaign.id,
            benchmark="needle",
            tier="dev",
            subject_id="ver-000000000000",
            metric="acc",
        )
    )
    found = bench.ok(Role.WORKER, "search_records", {"text": "needle"})["records"]
    assert [r["kind"] for r in found] == ["direction", "evaluation"]
    assert "visible needle" in found[0]["summary"]
    assert "needle/dev" in found[1]["summary"]
    assert len(bench.ok(Role.HUMAN, "search_records", {"text": "needle"})["records"]) == 4


def test_search_refuses_an_unreadable_or_unknown_kind(any_bench: Bench) -> None:
    bench = any_bench
    for kind in ("flag", "no_such_kind"):
        error = bench.fail(Role.WORKER, "search_records", {"kind": kind}, code="invalid_arguments")
        assert error.field == "kind"
        assert error.expected is not None and "experiment" in error.expected
        assert "flag" not in error.expected
    bench.fail(Role.MAIN, "search_records", {"kind": "artifact"}, code="invalid_arguments")
    bench.put(ProtocolFlag(campaign_id=bench.campaign.id, stage="access", rule="r", detail="d"))
    assert bench.ok(Role.LEADER, "search_records", {"kind": "flag"})["count"] == 1
    assert bench.ok(Role.HUMAN, "search_records", {"kind": "flag"})["count"] == 1
    assert bench.ok(Role.WORKER, "search_records", {"text": "access"})["count"] == 0


def test_lineage_of_an_experiment_chain(any_bench: Bench) -> None:
    bench = any_bench
    direction = bench.direction()
    first = bench.experiment(direction, "first")
    second = bench.experiment(direction, "second", parent_experiment_id=first)
    third = bench.experiment(direction, "third", parent_experiment_id=second)
    sibling = bench.experiment(direction, "sibling", parent_experiment_id=second)
    bench.log(second, 0.5)
    value = bench.ok(Role.REVIEWER, "get_lineage", {"record_id": second})
    assert value["record"]["id"] == second
    assert [a["id"] for a in value["ancestors"]] == [first]
    assert [c["id"] for c in value["children"]] == [third, sibling]
    assert value["direction"]["id"] == direction
    assert [(h["action"], h["tool"]) for h in value["history"]] == [
        ("tool_call", "create_experiment"),
        ("tool_call", "log_metric"),
    ]
    assert all(h["actor"] == "worker-1" for h in value["history"])
    deep = bench.ok(Role.WORKER, "get_lineage", {"record_id": third})
    assert [a["id"] for a in deep["ancestors"]] == [second, first]
    assert deep["children"] == []


def test_lineage_of_a_direction_dag(any_bench: Bench) -> None:
    bench = any_bench
    root = bench.direction("root")
    left = bench.direction("left", parents=[{"parent_id": root, "relation": "branch"}])
    right = bench.direction("right", parents=[{"parent_id": root, "relation": "verify"}])
    join = bench.direction(
        "join",
        parents=[
            {"parent_id": left, "relation": "continue"},
            {"parent_id": right, "relation": "revise"},
        ],
    )
    exp = bench.experiment(join)
    value = bench.ok(Role.MAIN, "get_lineage", {"record_id": join})
    assert [(a["id"], a["relation"]) for a in value["ancestors"]] == [
        (left, "continue"),
        (right, "revise"),
        (root, "branch"),  # reached through left first, listed once
    ]
    assert value["children"] == []
    assert [e["id"] for e in value["experiments"]] == [exp]
    root_view = bench.ok(Role.MAIN, "get_lineage", {"record_id": root})
    assert [(c["id"], c["relation"]) for c in root_view["children"]] == [
        (left, "branch"),
        (right, "verify"),
    ]
    assert root_view["ancestors"] == [] and root_view["experiments"] == []
    assert [h["tool"] for h in root_view["history"]] == ["create_direction"]


def test_lineage_of_a_version_and_of_other_records(any_bench: Bench) -> None:
    bench = any_bench
    v0 = SystemVersion(campaign_id=bench.campaign.id, label="H0/M0", harness_sha256="0" * 64)
    bench.put(v0)
    v1 = SystemVersion(
        campaign_id=bench.campaign.id, label="H1/M0", harness_sha256="1" * 64, parent_id=v0.id
    )
    bench.put(v1, action="version_accepted")
    value = bench.ok(Role.HUMAN, "get_lineage", {"record_id": v1.id})
    assert [a["id"] for a in value["ancestors"]] == [v0.id]
    # versions carry private final-tier scores: agents see them only through tool views
    bench.fail(Role.MAIN, "get_lineage", {"record_id": v1.id}, code="guard_refused")
    assert [h["action"] for h in value["history"]] == ["version_accepted"]
    campaign = bench.ok(Role.MAIN, "get_lineage", {"record_id": bench.campaign.id})
    assert [h["action"] for h in campaign["history"]] == ["campaign_created"]
    assert "ancestors" not in campaign


def test_lineage_refusals(any_bench: Bench) -> None:
    bench = any_bench
    error = bench.fail(
        Role.WORKER, "get_lineage", {"record_id": "exp-000000000000"}, code="not_found"
    )
    assert error.field == "record_id"
    flag = ProtocolFlag(campaign_id=bench.campaign.id, stage="access", rule="r", detail="d")
    bench.put(flag)
    bench.fail(Role.WORKER, "get_lineage", {"record_id": flag.id}, code="guard_refused")
    assert bench.ok(Role.LEADER, "get_lineage", {"record_id": flag.id})["record"]["id"] == flag.id
    other = bench.ctx(Role.WORKER, campaign_id=bench.other_campaign().id)
    exp = bench.experiment(bench.direction())
    result = bench.call(other, "get_lineage", {"record_id": exp})
    assert result.error is not None and result.error.code == "guard_refused"


def test_compare_lists_only_differing_config_keys(any_bench: Bench) -> None:
    bench = any_bench
    direction = bench.direction()
    a = bench.experiment(direction, config={"lr": 0.1, "layers": 2, "seed": 1})
    b = bench.experiment(direction, config={"lr": 0.01, "layers": 2, "seed": 1})
    c = bench.experiment(direction, config={"lr": 0.1, "layers": 2, "seed": 1, "extra": True})
    bench.log(a, 0.5)
    bench.log(a, 0.6)  # the last value counts
    bench.log(a, 1.5, name="loss", split="train")
    bench.log(b, 0.7)
    bench.finish(b)
    value = bench.ok(Role.REVIEWER, "compare_experiments", {"experiment_ids": [a, b, c]})
    assert value["differing_config_keys"] == ["extra", "lr"]
    rows = {r["id"]: r for r in value["experiments"]}
    assert rows[a]["config"] == {"extra": None, "lr": 0.1}
    assert rows[c]["config"] == {"extra": True, "lr": 0.1}
    assert rows[a]["metrics"] == {"dev/accuracy": 0.6, "train/loss": 1.5}
    assert rows[a]["sources"] == {"dev/accuracy": "agent-reported", "train/loss": "agent-reported"}
    assert rows[c]["metrics"] == rows[c]["sources"] == {}
    assert rows[b]["state"] == str(ExperimentState.SUCCEEDED)
    assert all(r["direction_id"] == direction for r in rows.values())
    only = bench.ok(
        Role.WORKER, "compare_experiments", {"experiment_ids": [a, b], "metric": "loss"}
    )
    assert only["differing_config_keys"] == ["lr"]
    assert [r["metrics"] for r in only["experiments"]] == [{"train/loss": 1.5}, {}]


def test_compare_shows_the_controllers_value_over_a_later_logged_one(any_bench: Bench) -> None:
    bench = any_bench
    direction = bench.direction()
    a, b = bench.experiment(direction), bench.experiment(direction)
    exp = bench.get_experiment(a)
    measured = [
        Metric(name="accuracy", value=0.71, source=MetricSource.CONTROLLER),
        Metric(name="accuracy", value=0.74, source=MetricSource.CONTROLLER),
    ]
    bench.put(exp.model_copy(update={"metrics": measured}))
    bench.log(a, 0.99)  # the worker's later number
    bench.log(b, 0.5)
    rows = bench.ok(Role.REVIEWER, "compare_experiments", {"experiment_ids": [a, b]})
    [row_a, row_b] = rows["experiments"]
    assert (row_a["metrics"], row_a["sources"]) == (
        {"dev/accuracy": 0.74},
        {"dev/accuracy": "controller"},
    )
    assert (row_b["metrics"], row_b["sources"]) == (
        {"dev/accuracy": 0.5},
        {"dev/accuracy": "agent-reported"},
    )


def test_compare_needs_two_readable_experiments(any_bench: Bench) -> None:
    bench = any_bench
    a = bench.experiment(bench.direction())
    error = bench.fail(
        Role.WORKER, "compare_experiments", {"experiment_ids": [a]}, code="invalid_arguments"
    )
    assert error.field == "experiment_ids"
    error = bench.fail(
        Role.WORKER,
        "compare_experiments",
        {"experiment_ids": [a, "exp-000000000000"]},
        code="not_found",
    )
    assert error.field == "experiment_ids.1"
