"""Execution and state tools: the research DAG, experiments, metrics and immutability."""

from __future__ import annotations

from pathlib import Path

from rsilab.records import (
    Dataset,
    Direction,
    DirectionState,
    Experiment,
    ExperimentState,
    MetricSource,
    ProtocolFlag,
    Role,
)
from rsilab.store import ArtifactStore
from tests.expos.helpers import Bench


def test_create_direction_with_parents(any_bench: Bench) -> None:
    bench = any_bench
    root = bench.direction("root")
    other = bench.direction("other")
    parents = [
        {"parent_id": root, "relation": "continue"},
        {"parent_id": other, "relation": "branch"},
    ]
    child = bench.direction("child", plan="do it", parents=parents)
    record = bench.get_direction(child)
    assert record.campaign_id == bench.campaign.id
    assert record.created_by == "main-1" and record.plan == "do it"
    assert record.state == DirectionState.OPEN
    assert [(e.parent_id, str(e.relation)) for e in record.parents] == [
        (root, "continue"),
        (other, "branch"),
    ]


def test_create_direction_with_an_unknown_parent(any_bench: Bench) -> None:
    bench = any_bench
    parents = [{"parent_id": "dir-000000000000", "relation": "verify"}]
    error = bench.fail(
        Role.MAIN,
        "create_direction",
        {"title": "t", "hypothesis": "h", "parents": parents},
        code="not_found",
    )
    assert error.field == "parents.0.parent_id"
    assert bench.store.query(Direction.KIND) == []


def test_create_direction_with_a_bad_relation(any_bench: Bench) -> None:
    bench = any_bench
    parents = [{"parent_id": bench.direction(), "relation": "merge"}]
    error = bench.fail(
        Role.MAIN,
        "create_direction",
        {"title": "t", "hypothesis": "h", "parents": parents},
        code="invalid_arguments",
    )
    assert error.field == "parents.0.relation"


def test_create_direction_with_a_parent_of_another_kind(any_bench: Bench) -> None:
    bench = any_bench
    exp = bench.experiment(bench.direction())
    parents = [{"parent_id": exp, "relation": "continue"}]
    error = bench.fail(
        Role.MAIN,
        "create_direction",
        {"title": "t", "hypothesis": "h", "parents": parents},
        code="not_found",
    )
    assert error.field == "parents.0.parent_id"
    assert error.expected == "the id of a direction"


def test_blank_title_is_refused(any_bench: Bench) -> None:
    error = any_bench.fail(
        Role.MAIN,
        "create_direction",
        {"title": "   ", "hypothesis": "h"},
        code="invalid_arguments",
    )
    assert error.field == "title"


def _conclude(bench: Bench, direction_id: str) -> None:
    bench.ok(Role.MAIN, "update_direction", {"direction_id": direction_id, "status": "exhausted"})


def test_list_directions_with_counts_and_state_filter(any_bench: Bench) -> None:
    bench = any_bench
    a = bench.direction("a")
    b = bench.direction("b", parents=[{"parent_id": a, "relation": "revise"}])
    bench.experiment(a)
    bench.experiment(a)
    bench.experiment(b)
    _conclude(bench, a)
    listed = bench.ok(Role.WORKER, "list_directions")["directions"]
    assert [(d["id"], d["experiments"], d["state"]) for d in listed] == [
        (a, 2, "exhausted"),
        (b, 1, "open"),
    ]
    assert listed[1]["parents"] == [{"parent_id": a, "relation": "revise"}]
    assert listed[0]["hypothesis"] == "a helps"
    open_only = bench.ok(Role.MAIN, "list_directions", {"state": "open"})["directions"]
    assert [d["id"] for d in open_only] == [b]
    exhausted = bench.ok(Role.REVIEWER, "list_directions", {"state": "exhausted"})["directions"]
    assert [d["id"] for d in exhausted] == [a]
    bench.fail(Role.MAIN, "list_directions", {"state": "closed"}, code="invalid_arguments")
    bench.fail(Role.MAIN, "list_directions", {"state": "concluded"}, code="invalid_arguments")


def test_list_directions_only_of_the_callers_campaign(any_bench: Bench) -> None:
    bench = any_bench
    bench.direction("mine")
    other = bench.ctx(Role.MAIN, campaign_id=bench.other_campaign().id)
    bench.ok(other, "create_direction", {"title": "theirs", "hypothesis": "h"})
    listed = bench.ok(Role.MAIN, "list_directions")["directions"]
    assert [d["title"] for d in listed] == ["mine"]


def test_create_experiment(any_bench: Bench) -> None:
    bench = any_bench
    (bench.workspace / "a.txt").write_text("a")
    data = bench.ok(Role.WORKER, "add_data", {"path": "a.txt", "name": "d"})
    direction = bench.direction()
    parent = bench.experiment(direction)
    value = bench.ok(
        Role.WORKER,
        "create_experiment",
        {
            "direction_id": direction,
            "description": "lr sweep",
            "config": {"lr": 0.1, "layers": [1, 2]},
            "parent_experiment_id": parent,
            "data": ["d", data["id"]],
        },
    )
    assert value["state"] == "created"
    exp = bench.get_experiment(value["id"])
    assert exp.direction_id == direction and exp.parent_experiment_id == parent
    assert exp.config == {"lr": 0.1, "layers": [1, 2]}
    assert exp.data_ids == [data["id"], data["id"]]
    assert exp.created_by == "worker-1" and exp.campaign_id == bench.campaign.id


def test_create_experiment_on_a_concluded_direction_conflicts(any_bench: Bench) -> None:
    bench = any_bench
    direction = bench.direction()
    _conclude(bench, direction)
    error = bench.fail(
        Role.WORKER,
        "create_experiment",
        {"direction_id": direction, "description": "x"},
        code="conflict",
    )
    assert error.field == "direction_id"


def test_create_experiment_refuses_private_data(any_bench: Bench) -> None:
    bench = any_bench
    private = Dataset(
        campaign_id=bench.campaign.id,
        name="p",
        artifact_sha256="0" * 64,
        artifact_kind="file",
        tier="final",
    )
    bench.put(private)
    args = {"direction_id": bench.direction(), "description": "x", "data": [private.id]}
    bench.fail(Role.WORKER, "create_experiment", args, code="guard_refused")
    args["data"] = ["p"]
    bench.fail(Role.WORKER, "create_experiment", args, code="not_found")
    assert bench.store.query(Experiment.KIND) == []


def test_create_experiment_with_a_malformed_id(any_bench: Bench) -> None:
    error = any_bench.fail(
        Role.WORKER,
        "create_experiment",
        {"direction_id": "DROP TABLE", "description": "x"},
        code="invalid_arguments",
    )
    assert error.field == "direction_id"


def test_log_metric_is_agent_reported_and_starts_the_experiment(any_bench: Bench) -> None:
    bench = any_bench
    exp = bench.experiment(bench.direction())
    assert bench.get_experiment(exp).state == ExperimentState.CREATED
    value = bench.ok(
        Role.WORKER,
        "log_metric",
        {"experiment_id": exp, "name": "loss", "value": 0.5, "split": "train", "step": 3},
    )
    assert value == {"experiment_id": exp, "metrics": 1, "source": "agent-reported"}
    bench.log(exp, 0.9)
    record = bench.get_experiment(exp)
    assert record.state == ExperimentState.RUNNING
    assert [(m.name, m.value, m.split, m.step) for m in record.metrics] == [
        ("loss", 0.5, "train", 3),
        ("accuracy", 0.9, "dev", None),
    ]
    assert all(m.source == MetricSource.AGENT_REPORTED for m in record.metrics)


def test_log_metric_refuses_a_negative_step(any_bench: Bench) -> None:
    bench = any_bench
    exp = bench.experiment(bench.direction())
    args = {"experiment_id": exp, "name": "a", "value": 1.0, "step": -1}
    assert bench.fail(Role.WORKER, "log_metric", args, code="invalid_arguments").field == "step"


def test_finish_makes_the_experiment_immutable(any_bench: Bench) -> None:
    bench = any_bench
    exp = bench.experiment(bench.direction())
    bench.log(exp, 0.5)
    value = bench.ok(
        Role.WORKER,
        "finish_experiment",
        {"experiment_id": exp, "status": "failed", "summary": "diverged"},
    )
    assert value["id"] == exp and value["state"] == "failed"
    record = bench.get_experiment(exp)
    assert record.is_finished() and record.summary_text == "diverged"
    assert record.finished_at is not None
    error = bench.fail(
        Role.WORKER,
        "log_metric",
        {"experiment_id": exp, "name": "a", "value": 1.0},
        code="conflict",
    )
    assert error.field == "experiment_id"
    bench.fail(
        Role.WORKER,
        "finish_experiment",
        {"experiment_id": exp, "status": "succeeded"},
        code="conflict",
    )
    assert bench.get_experiment(exp) == record
    bench.fail(
        Role.WORKER,
        "finish_experiment",
        {"experiment_id": exp, "status": "created"},
        code="invalid_arguments",
    )
    bench.assert_verifies()


def test_finish_snapshots_the_workspace(any_bench: Bench, tmp_path: Path) -> None:
    bench = any_bench
    (bench.workspace / "train.py").write_text("print('hi')\n")
    (bench.workspace / "cfg").mkdir()
    (bench.workspace / "cfg" / "a.json").write_text("{}")
    exp = bench.experiment(bench.direction())
    value = bench.finish(exp)
    expected = ArtifactStore(tmp_path / "independent").put_tree(bench.workspace)
    assert value["workspace_hash"] == expected.sha256
    assert bench.get_experiment(exp).workspace_hash == expected.sha256
    paths = [e["path"] for e in bench.artifacts.manifest(expected.sha256)]
    assert paths == ["cfg/a.json", "train.py"]
    # A later change to the workspace gives another hash for the next experiment.
    (bench.workspace / "train.py").write_text("print('changed')\n")
    second = bench.finish(bench.experiment(bench.direction("d2")))
    assert second["workspace_hash"] != expected.sha256


def test_finish_without_a_workspace_keeps_no_hash(any_bench: Bench) -> None:
    bench = any_bench
    exp = bench.experiment(bench.direction())
    ctx = bench.ctx(Role.WORKER, workspace=None)
    value = bench.ok(ctx, "finish_experiment", {"experiment_id": exp, "status": "cancelled"})
    assert value["workspace_hash"] is None


def test_get_experiment(any_bench: Bench) -> None:
    bench = any_bench
    exp = bench.experiment(bench.direction(), config={"lr": 1e-3})
    bench.log(exp, 0.7)
    for role in Role:
        got = bench.ok(role, "get_experiment", {"experiment_id": exp})["experiment"]
        assert got == bench.get_experiment(exp).model_dump(mode="json")
    error = bench.fail(
        Role.WORKER, "get_experiment", {"experiment_id": "exp-000000000000"}, code="not_found"
    )
    assert error.field == "experiment_id"
    direction = bench.direction("d2")
    error = bench.fail(
        Role.WORKER, "get_experiment", {"experiment_id": direction}, code="not_found"
    )
    assert "is a direction" in error.message


def test_experiments_belong_to_one_campaign(any_bench: Bench) -> None:
    bench = any_bench
    exp = bench.experiment(bench.direction())
    other = bench.ctx(Role.WORKER, campaign_id=bench.other_campaign().id)
    for tool, args in [
        ("get_experiment", {"experiment_id": exp}),
        ("log_metric", {"experiment_id": exp, "name": "a", "value": 1.0}),
        ("finish_experiment", {"experiment_id": exp, "status": "succeeded"}),
    ]:
        result = bench.call(other, tool, args)
        assert result.error is not None and result.error.code == "guard_refused"
        assert "another campaign" in result.error.message
        event = bench.last_event()
        assert event.seq == result.seq and event.outcome == "denied"
        [flag] = [bench.store.get(ref.id) for ref in event.records]
        assert isinstance(flag, ProtocolFlag)
        assert (flag.rule, flag.stage, flag.tool) == ("record_not_readable", "access", tool)
        assert flag.campaign_id == other.campaign_id
    assert bench.get_experiment(exp).state == ExperimentState.CREATED
    assert bench.get_experiment(exp).metrics == []


# -- update_direction: the lifecycle and the evidence rule --------------------------------------


def _update(direction_id: str, status: str, **extra: object) -> dict[str, object]:
    return {"direction_id": direction_id, "status": status, **extra}


def _review(bench: Bench, exps: list[str], verdict: str = "supports", **extra: object) -> str:
    args = {"experiment_ids": exps, "verdict": verdict, "recommendation": "verify", **extra}
    return str(bench.ok(Role.REVIEWER, "submit_review", args)["id"])


def test_update_direction_walks_the_lifecycle(any_bench: Bench) -> None:
    bench = any_bench
    d = bench.direction()
    value = bench.ok(Role.MAIN, "update_direction", _update(d, "promising"))
    assert value == {"id": d, "state": "promising", "previous": "open"}
    bench.experiment(d)  # a promising direction still takes experiments
    bench.ok(Role.MAIN, "update_direction", _update(d, "open"))
    bench.ok(Role.MAIN, "update_direction", _update(d, "refuted", conclusion="no gain"))
    record = bench.get_direction(d)
    assert record.state == DirectionState.REFUTED and record.is_finished()
    assert record.conclusion == "no gain"
    assert [(str(c.previous), str(c.status), c.by) for c in record.history] == [
        ("open", "promising", "main-1"),
        ("promising", "open", "main-1"),
        ("open", "refuted", "main-1"),
    ]
    error = bench.fail(Role.MAIN, "update_direction", _update(d, "open"), code="conflict")
    assert error.field == "status" and "none: it is final" in error.message
    args = {"direction_id": d, "description": "x"}
    bench.fail(Role.WORKER, "create_experiment", args, code="conflict")
    bench.assert_verifies()


def test_update_direction_names_the_allowed_states(any_bench: Bench) -> None:
    bench = any_bench
    d = bench.direction()
    for status in ("open", "supported"):
        error = bench.fail(Role.MAIN, "update_direction", _update(d, status), code="conflict")
        assert "exhausted, promising, refuted" in error.message
    bench.fail(Role.MAIN, "update_direction", _update(d, "concluded"), code="invalid_arguments")
    assert bench.get_direction(d).history == []


def test_only_the_main_agent_updates_directions(any_bench: Bench) -> None:
    bench = any_bench
    d = bench.direction()
    for role in (Role.WORKER, Role.REVIEWER, Role.LEADER):
        bench.fail(role, "update_direction", _update(d, "exhausted"), code="permission_denied")
    other = bench.ctx(Role.MAIN, campaign_id=bench.other_campaign().id)
    bench.fail(other, "update_direction", _update(d, "exhausted"), code="guard_refused")
    assert bench.get_direction(d).state == DirectionState.OPEN


def test_supported_needs_a_supporting_review_of_the_direction(any_bench: Bench) -> None:
    bench = any_bench
    d = bench.direction()
    exps = [bench.experiment(d), bench.experiment(d)]
    bench.ok(Role.MAIN, "update_direction", _update(d, "promising"))
    error = bench.fail(
        Role.MAIN, "update_direction", _update(d, "supported"), code="invalid_arguments"
    )
    assert error.field == "review_ids"
    doubtful = _review(bench, exps, verdict="inconclusive")
    args = _update(d, "supported", review_ids=[doubtful])
    bench.fail(Role.MAIN, "update_direction", args, code="invalid_arguments")
    elsewhere = _review(bench, [bench.experiment(bench.direction("other"))])
    args = _update(d, "supported", review_ids=[elsewhere])
    assert bench.fail(Role.MAIN, "update_direction", args, code="invalid_arguments").field == (
        "review_ids.0"
    )
    bench.fail(
        Role.MAIN,
        "update_direction",
        _update(d, "supported", review_ids=["rev-000000000000"]),
        code="not_found",
    )
    good = _review(bench, exps)
    args = _update(d, "supported", review_ids=[doubtful, good])
    assert bench.ok(Role.MAIN, "update_direction", args)["state"] == "supported"
    assert bench.get_direction(d).history[-1].review_ids == [doubtful, good]


def test_a_verify_child_can_support_its_parent_against_any_baseline(any_bench: Bench) -> None:
    bench = any_bench
    base_dir = bench.direction("baseline")
    base = [bench.experiment(base_dir) for _ in range(2)]
    d = bench.direction("idea")
    bench.ok(Role.MAIN, "update_direction", _update(d, "promising"))
    branch = bench.direction("branch", parents=[{"parent_id": d, "relation": "branch"}])
    verify = bench.direction("re-run", parents=[{"parent_id": d, "relation": "verify"}])
    for exp, value in zip(base, (0.5, 0.52), strict=True):
        bench.log(exp, value)
    reruns = [bench.experiment(verify) for _ in range(2)]
    for exp, value in zip(reruns, (0.8, 0.82), strict=True):
        bench.log(exp, value)
    compared = {"metric": "accuracy", "baseline_ids": base}
    # A branch child is another hypothesis: its results do not support the parent.
    branched = _review(bench, [bench.experiment(branch)])
    args = _update(d, "supported", review_ids=[branched])
    bench.fail(Role.MAIN, "update_direction", args, code="invalid_arguments")
    good = _review(bench, reruns, **compared)
    args = _update(d, "supported", review_ids=[good])
    assert bench.ok(Role.MAIN, "update_direction", args)["state"] == "supported"


def test_create_experiment_stops_at_the_campaigns_experiment_budget(bench: Bench) -> None:
    from rsilab.expos import open_campaign
    from rsilab.records import TaskRef

    campaign = open_campaign(
        bench.store, TaskRef(name="digits"), settings={"budget": "experiments=2,wall=60s"}
    )
    bench.campaign = campaign
    direction = bench.direction()
    bench.experiment(direction)
    bench.experiment(direction)
    error = bench.fail(
        Role.WORKER,
        "create_experiment",
        {"direction_id": direction, "description": "a third"},
        code="budget_exhausted",
    )
    assert "2 of 2" in error.message
    assert len(bench.store.query_as(Experiment, campaign_id=campaign.id)) == 2
