"""The dispatcher: every failure is a ToolError for the agent and an event in the ledger."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from rsilab.errors import ToolError
from rsilab.expos import Category, ExperimentOS, ToolEnv, ToolRegistry, policy
from rsilab.expos.tools._base import WorkspacePath
from rsilab.records import Dataset, Event, Experiment, Outcome, ProtocolFlag, Record, Role
from rsilab.store.ledger import args_digest
from tests.expos.helpers import Bench


def _event_of(bench: Bench, seq: int | None) -> Event:
    assert seq is not None
    return bench.store.events(after=seq - 1, limit=1)[0]


def _written(bench: Bench, event: Event) -> list[Record]:
    return [bench.store.get(ref.id) for ref in event.records]


def _failed(
    bench: Bench, role: Role, tool: Any, args: Any, code: str, outcome: Outcome = Outcome.ERROR
) -> tuple[ToolError, Event]:
    """Call, check the error code and that the event records the failure; return both."""
    result = bench.call(role, tool, args)
    assert result.error is not None, result.value
    assert result.error.code == code, result.to_dict()
    event = _event_of(bench, result.seq)
    assert event.action == "tool_call"
    assert event.outcome == outcome
    assert event.tool == tool
    assert event.args_digest == args_digest(args)
    assert event.error == result.error.to_dict()
    assert event.actor == f"{role}-1" and event.role == str(role)
    assert event.campaign_id == bench.campaign.id
    json.dumps(result.to_dict())
    return result.error, event


def _flag_of(bench: Bench, event: Event) -> ProtocolFlag:
    records = _written(bench, event)
    assert len(records) == 1
    flag = records[0]
    assert isinstance(flag, ProtocolFlag)
    assert flag.stage == "access" and flag.blocked
    assert flag.campaign_id == bench.campaign.id
    return flag


def test_a_successful_call_is_one_event_with_its_records(bench: Bench) -> None:
    before = bench.store.head()[0]
    args = {"title": "t", "hypothesis": "h"}
    result = bench.call(Role.MAIN, "create_direction", args)
    assert result.ok and result.value is not None
    assert result.seq == before + 1 == bench.store.head()[0]
    event = _event_of(bench, result.seq)
    assert event.outcome == Outcome.OK and event.error is None
    assert event.tool == "create_direction" and event.args_digest == args_digest(args)
    assert [r.id for r in event.records] == [result.value["id"]]
    assert event.cost is not None and event.cost.wall_s >= 0


def test_unknown_tool_with_a_hint(bench: Bench) -> None:
    error, event = _failed(bench, Role.WORKER, "log_metrics", {}, "unknown_tool")
    assert "did you mean log_metric" in error.message
    assert error.field == "name"
    assert event.records == []


def test_unknown_tool_without_a_close_match(bench: Bench) -> None:
    error, _ = _failed(bench, Role.WORKER, "zzzzqqqq", None, "unknown_tool")
    assert "did you mean" not in error.message


def test_role_not_allowed_is_denied_and_flagged(bench: Bench) -> None:
    args = {"title": "t", "hypothesis": "h"}
    error, event = _failed(
        bench, Role.WORKER, "create_direction", args, "permission_denied", Outcome.DENIED
    )
    assert "worker" in error.message
    flag = _flag_of(bench, event)
    assert flag.rule == "tool_not_allowed_for_role"
    assert flag.tool == "create_direction"
    assert flag.actor == "worker-1" and flag.role == "worker"


@pytest.mark.parametrize("args", [[1, 2], 3, True, 1.5, "[1]", '"text"', "null"])
def test_arguments_must_be_an_object(bench: Bench, args: Any) -> None:
    error, event = _failed(bench, Role.MAIN, "list_directions", args, "invalid_arguments")
    assert "object" in (error.expected or "")
    assert event.records == []


def test_arguments_as_a_json_string_are_accepted(bench: Bench) -> None:
    args = json.dumps({"title": "t", "hypothesis": "h"})
    result = bench.call(Role.MAIN, "create_direction", args)
    assert result.ok, result.to_dict()
    assert _event_of(bench, result.seq).args_digest == args_digest(args)
    assert bench.call(Role.MAIN, "list_directions", "").ok
    assert bench.call(Role.MAIN, "list_directions", b'{"state": "open"}').ok


@pytest.mark.parametrize("args", ["{not json", '{"a": 1', "\x00", b"\xff\xfe"])
def test_malformed_json_string(bench: Bench, args: Any) -> None:
    error, _ = _failed(bench, Role.MAIN, "list_directions", args, "invalid_arguments")
    assert "JSON" in error.message


def test_missing_field_is_named_with_what_it_expects(bench: Bench) -> None:
    error, _ = _failed(bench, Role.MAIN, "create_direction", {"title": "t"}, "invalid_arguments")
    assert error.field == "hypothesis"
    assert error.expected == "string"
    assert "hypothesis" in error.message
    assert error.details and error.details[0]["field"] == "hypothesis"


def test_unknown_field_is_named_first(bench: Bench) -> None:
    # The typo explains the missing field, so it comes first.
    args = {"title": "t", "hypothesys": "h"}
    error, _ = _failed(bench, Role.MAIN, "create_direction", args, "invalid_arguments")
    assert error.field == "hypothesys"
    assert "unknown argument 'hypothesys'" in error.message
    assert error.expected is not None and "hypothesis" in error.expected
    assert {d["field"] for d in error.details} == {"hypothesys", "hypothesis"}


def test_wrong_type_is_named(bench: Bench) -> None:
    exp = bench.experiment(bench.direction())
    args: dict[str, Any] = {"experiment_id": exp, "name": "acc", "value": "high"}
    error, _ = _failed(bench, Role.WORKER, "log_metric", args, "invalid_arguments")
    assert error.field == "value"
    assert error.expected == "number"
    args = {"experiment_id": exp, "name": "acc", "value": 1.0, "split": "accept"}
    error, _ = _failed(bench, Role.WORKER, "log_metric", args, "invalid_arguments")
    assert error.field == "split" and error.expected == "one of train, dev"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_metric_is_refused(bench: Bench, value: float) -> None:
    exp = bench.experiment(bench.direction())
    args = {"experiment_id": exp, "name": "acc", "value": value}
    error, _ = _failed(bench, Role.WORKER, "log_metric", args, "invalid_arguments")
    assert error.field == "value"
    assert "finite" in error.message
    assert bench.get_experiment(exp).metrics == []


def test_nan_in_a_json_string_is_refused(bench: Bench) -> None:
    exp = bench.experiment(bench.direction())
    args = f'{{"experiment_id": "{exp}", "name": "acc", "value": NaN}}'
    error, _ = _failed(bench, Role.WORKER, "log_metric", args, "invalid_arguments")
    assert error.field == "value"


def _add_data(bench: Bench, path: str, name: str = "d") -> tuple[ToolError, Event]:
    return _failed(
        bench,
        Role.WORKER,
        "add_data",
        {"path": path, "name": name},
        "guard_refused",
        Outcome.DENIED,
    )


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "sub/../../outside.txt"])
def test_path_outside_the_workspace_is_refused_and_flagged(bench: Bench, path: str) -> None:
    (bench.workspace.parent / "outside.txt").write_text("secret")
    error, event = _add_data(bench, path)
    assert error.field == "path"
    assert _flag_of(bench, event).rule == "path_outside_workspace"
    assert bench.store.query(Dataset.KIND) == []


def test_symlink_out_of_the_workspace_is_refused(bench: Bench) -> None:
    outside = bench.workspace.parent / "outside.txt"
    outside.write_text("secret")
    os.symlink(outside, bench.workspace / "innocent.txt")
    os.symlink(bench.workspace.parent, bench.workspace / "up")
    for path in ("innocent.txt", "up/outside.txt", str(bench.workspace / "innocent.txt")):
        _, event = _add_data(bench, path)
        assert _flag_of(bench, event).rule == "path_outside_workspace"
    assert bench.store.query(Dataset.KIND) == []


def test_absolute_path_inside_the_workspace_is_fine(bench: Bench) -> None:
    (bench.workspace / "in.txt").write_text("ok")
    args = {"path": str(bench.workspace / "in.txt"), "name": "d"}
    assert bench.ok(Role.WORKER, "add_data", args)["size"] == 2


def test_path_that_does_not_exist(bench: Bench) -> None:
    error, event = _failed(
        bench, Role.WORKER, "add_data", {"path": "missing.txt", "name": "d"}, "not_found"
    )
    assert error.field == "path"
    assert event.records == []


def test_path_with_a_nul_byte(bench: Bench) -> None:
    error, _ = _failed(
        bench, Role.WORKER, "add_data", {"path": "a\x00b", "name": "d"}, "invalid_arguments"
    )
    assert error.field == "path"


def test_path_without_a_workspace_is_refused(bench: Bench) -> None:
    (bench.workspace / "in.txt").write_text("ok")
    ctx = bench.ctx(Role.WORKER, workspace=None)
    args = {"path": "in.txt", "name": "d"}
    result = bench.call(ctx, "add_data", args)
    assert result.error is not None and result.error.code == "guard_refused"
    event = _event_of(bench, result.seq)
    assert event.outcome == Outcome.DENIED
    assert _flag_of(bench, event).rule == "no_workspace"


def test_tool_needing_a_campaign_without_one(bench: Bench) -> None:
    ctx = bench.ctx(Role.MAIN, campaign_id=None)
    result = bench.call(ctx, "create_direction", {"title": "t", "hypothesis": "h"})
    assert result.error is not None and result.error.code == "no_campaign"
    event = _event_of(bench, result.seq)
    assert event.outcome == Outcome.ERROR and event.campaign_id is None


def _crashing_os(bench: Bench, monkeypatch: pytest.MonkeyPatch) -> ExperimentOS:
    registry = ToolRegistry()

    @registry.tool(Category.EXECUTION)
    def explode(env: ToolEnv, text: str = "") -> dict[str, Any]:
        """Stage a record, then fail the way a bug would.

        Args:
            text: anything.
        """
        env.stage(Experiment(campaign_id=env.call.campaign_id, direction_id="dir-000000000000"))
        raise ZeroDivisionError("boom")

    @registry.tool(Category.EXECUTION)
    def not_json(env: ToolEnv) -> dict[str, Any]:
        """Return something that is not JSON."""
        return {"value": {1, 2}}

    monkeypatch.setitem(policy.TOOL_ROLES, "explode", frozenset({Role.WORKER}))
    monkeypatch.setitem(policy.TOOL_ROLES, "not_json", frozenset({Role.WORKER}))
    return ExperimentOS(bench.store, bench.artifacts, registry)


def test_unexpected_exception_is_an_internal_error(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    crashing = _crashing_os(bench, monkeypatch)
    ctx = bench.ctx(Role.WORKER)
    for tool in ("explode", "not_json"):
        result = crashing.call(ctx, tool, {})
        assert result.error is not None and result.error.code == "internal_error"
        assert "bug" in result.error.message
        event = _event_of(bench, result.seq)
        assert event.outcome == Outcome.ERROR and event.tool == tool
        assert event.records == []  # the staged experiment was dropped
    assert "explode" in caplog.text
    assert bench.store.query(Experiment.KIND) == []
    # The process goes on: the next call works.
    assert crashing.call(ctx, "explode", {"nope": 1}).error is not None
    assert bench.call(Role.MAIN, "list_directions").ok


def test_failed_call_writes_nothing_but_its_event(bench: Bench) -> None:
    direction = bench.direction()
    records_before = len(bench.store.query())
    args = {"direction_id": direction, "description": "x", "data": ["no-such-data"]}
    error, event = _failed(bench, Role.WORKER, "create_experiment", args, "not_found")
    assert error.field == "data.0"
    assert event.records == []
    assert bench.store.query(Experiment.KIND) == []
    assert len(bench.store.query()) == records_before


def test_failed_guard_writes_only_its_flag(bench: Bench) -> None:
    other = bench.other_campaign()
    foreign = Experiment(campaign_id=other.id, direction_id="dir-000000000000")
    bench.put(foreign)
    mine = bench.direction()
    args = {"direction_id": mine, "description": "x", "parent_experiment_id": foreign.id}
    error, event = _failed(
        bench, Role.WORKER, "create_experiment", args, "guard_refused", Outcome.DENIED
    )
    assert "another campaign" in error.message
    assert _flag_of(bench, event).rule == "record_not_readable"
    assert [e.id for e in bench.store.query(Experiment.KIND)] == [foreign.id]


def test_tools_for_a_role_follow_the_policy(bench: Bench) -> None:
    names = [t.name for t in bench.expos.tools_for(Role.REVIEWER)]
    assert "submit_review" in names and "log_metric" not in names
    assert all(policy.may_call(Role.REVIEWER, n) for n in names)


def test_the_ledger_verifies_after_every_kind_of_failure(bench: Bench) -> None:
    (bench.workspace.parent / "outside.txt").write_text("secret")
    os.symlink(bench.workspace.parent / "outside.txt", bench.workspace / "link")
    direction = bench.direction()
    exp = bench.experiment(direction)
    before = bench.store.head()[0]
    calls: list[tuple[Role, Any, Any]] = [
        (Role.WORKER, "nope", {}),
        (Role.WORKER, None, {}),
        (Role.REVIEWER, "log_metric", {}),
        (Role.WORKER, "log_metric", [1]),
        (Role.WORKER, "log_metric", "{bad"),
        (Role.WORKER, "log_metric", {"experiment_id": exp}),
        (Role.WORKER, "log_metric", {"experiment_id": exp, "name": "a", "value": "x"}),
        (Role.WORKER, "log_metric", {"experiment_id": exp, "name": "a", "value": float("nan")}),
        (Role.WORKER, "add_data", {"path": "../outside.txt", "name": "x"}),
        (Role.WORKER, "add_data", {"path": "link", "name": "x"}),
        (Role.WORKER, "get_experiment", {"experiment_id": "exp-000000000000"}),
        (
            Role.WORKER,
            "create_experiment",
            {"direction_id": direction, "description": "x", "data": ["missing"]},
        ),
    ]
    for role, tool, args in calls:
        result = bench.call(role, tool, args)
        assert result.error is not None
        assert result.error.code != "internal_error"
    assert bench.store.head()[0] == before + len(calls)
    events = bench.store.events(after=before)
    assert all(e.outcome in {Outcome.ERROR, Outcome.DENIED} for e in events)
    flags = bench.store.query(ProtocolFlag.KIND)
    assert len(flags) == 3
    bench.assert_verifies()


# Values that validate but cannot be stored as canonical JSON must be refused up front:
# before, they made the commit raise out of ExperimentOS.call (or were silently rewritten).
@pytest.mark.parametrize(
    "config",
    [
        {"seed": 10**30},
        {"seed": 2**53},
        {"lr": float("nan")},
        {"lr": [1.0, float("inf")]},
        {"note": "lone \ud800 surrogate"},
        {"deep": {"a": {"b": "\udfff"}}},
    ],
)
def test_unstorable_values_are_refused(bench: Bench, config: dict[str, Any]) -> None:
    direction = bench.direction()
    args = {"direction_id": direction, "description": "x", "config": config}
    error, event = _failed(bench, Role.WORKER, "create_experiment", args, "invalid_arguments")
    assert error.field == "config"
    assert event.records == []
    assert bench.store.query(Experiment.KIND) == []
    bench.assert_verifies()


def test_largest_safe_integer_is_fine(bench: Bench) -> None:
    exp = bench.experiment(bench.direction(), config={"seed": 2**53 - 1, "neg": -(2**53 - 1)})
    assert bench.get_experiment(exp).config["seed"] == 2**53 - 1


def test_huge_step_given_as_text_is_refused(bench: Bench) -> None:
    exp = bench.experiment(bench.direction())
    args = {"experiment_id": exp, "name": "a", "value": 1.0, "step": "99999999999999999999"}
    error, _ = _failed(bench, Role.WORKER, "log_metric", args, "invalid_arguments")
    assert error.field == "step"
    assert bench.get_experiment(exp).metrics == []


def test_nesting_is_bounded(bench: Bench) -> None:
    def nested(depth: int) -> Any:
        value: Any = 1
        for _ in range(depth):
            value = {"a": value}
        return value

    direction = bench.direction()
    assert bench.experiment(direction, config={"a": nested(40)})
    args = {"direction_id": direction, "description": "x", "config": {"a": nested(300)}}
    error, _ = _failed(bench, Role.WORKER, "create_experiment", args, "invalid_arguments")
    assert error.field == "config" and "nests deeper" in error.message
    deep_text = '{"config": ' + '{"a": ' * 5000 + "1" + "}" * 5000 + "}"
    error, _ = _failed(bench, Role.WORKER, "create_experiment", deep_text, "invalid_arguments")
    assert "JSON" in error.message
    # A Python caller may pass objects nested past the recursion limit: still an answer.
    result = bench.call(Role.WORKER, "create_experiment", {**args, "config": {"a": nested(5000)}})
    assert result.error is not None and result.error.code == "invalid_arguments"
    bench.assert_verifies()


@pytest.mark.parametrize("name", ["log\ud800metric", "\udfff", None, 42, ["log_metric"]])
def test_tool_names_that_are_not_text(bench: Bench, name: Any) -> None:
    result = bench.call(Role.WORKER, name, {})
    assert result.error is not None and result.error.code == "unknown_tool"
    event = _event_of(bench, result.seq)
    assert event.tool is not None and event.tool.encode("utf-8")
    assert event.outcome == Outcome.ERROR
    json.dumps(result.to_dict())
    bench.assert_verifies()


def test_optional_path_arguments_are_guarded_too(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = ToolRegistry()

    @registry.tool(Category.DATA)
    def peek(env: ToolEnv, path: WorkspacePath | None = None) -> dict[str, Any]:
        """Say which path was given.

        Args:
            path: a file in the workspace.
        """
        return {"path": str(path)}

    monkeypatch.setitem(policy.TOOL_ROLES, "peek", frozenset({Role.WORKER}))
    expos = ExperimentOS(bench.store, bench.artifacts, registry)
    (bench.workspace.parent / "outside.txt").write_text("secret")
    (bench.workspace / "in.txt").write_text("ok")
    ctx = bench.ctx(Role.WORKER)
    refused = expos.call(ctx, "peek", {"path": "../outside.txt"})
    assert refused.error is not None and refused.error.code == "guard_refused"
    inside = expos.call(ctx, "peek", {"path": "in.txt"})
    assert inside.value == {"path": str((bench.workspace / "in.txt").resolve())}
    assert expos.call(ctx, "peek", {}).value == {"path": "None"}
