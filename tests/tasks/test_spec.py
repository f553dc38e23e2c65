"""The Task spec: every bad input gives a message naming the field and what was expected."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from rsilab.tasks import Benchmark, Budget, Knob, PoolSplits, Setting, Task, parse_budget


def _bench(**over: Any) -> dict[str, Any]:
    return {
        "name": "b",
        "scorer": "accuracy",
        "target": True,
        "samples": {"kind": "pool", "pool": "all.jsonl"},
        **over,
    }


def _task(**over: Any) -> dict[str, Any]:
    return {"name": "t", "goal": "g", "harness": "h", "benchmarks": [_bench()], **over}


def _errors(data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as info:
        Task.model_validate(data)
    return str(info.value)


def test_a_valid_task_has_defaults_and_a_stable_digest() -> None:
    task = Task.model_validate(_task())
    assert task.setting is Setting.BENCHMARK_GUIDED
    assert task.budget == Budget()
    assert task.targets[0].name == "b"
    assert task.digest() == Task.model_validate(_task()).digest()
    assert task.digest() != Task.model_validate(_task(goal="other")).digest()
    assert task.ref().name == "t"
    # A recorded digest is of the spec with its relative paths anchored where it was loaded.
    pool = {"kind": "pool", "pool": str(Path.cwd() / "all.jsonl")}
    anchored = _task(harness=str(Path.cwd() / "h"), benchmarks=[_bench(samples=pool)])
    assert task.ref().digest == Task.model_validate(anchored).digest()
    assert task.ref().digest != task.digest()


@pytest.mark.parametrize(
    ("over", "expected"),
    [
        ({"name": "Bad Name"}, "name\n  String should match pattern"),
        ({"benchmarks": []}, "at least 1 item"),
        (
            {"benchmarks": [_bench(scorer="acc")]},
            "unknown scorer 'acc'; known: absolute_error, accuracy",
        ),
        ({"benchmarks": [_bench(target=False)]}, "at least one benchmark must have target"),
        ({"benchmarks": [_bench(), _bench()]}, "repeated: b"),
        ({"benchmarks": [_bench(tolerance=-1)]}, "tolerance\n  Input should be greater"),
        ({"goal": ""}, "a benchmark-guided task needs a goal"),
        ({"setting": "guided"}, "'open-general', 'capability-directed' or 'benchmark-guided'"),
        ({"budget": "experiments=0"}, "experiments\n  Input should be greater than 0"),
        ({"budget": "wall=soon"}, "'soon' is not a duration"),
        ({"budget": "tokens=lots,speed=1"}, "'speed=1': expected experiments=N"),
        ({"budget": {"experiments": -3}}, "greater than 0"),
        ({"surprise": 1}, "surprise\n  Extra inputs are not permitted"),
    ],
)
def test_bad_fields_are_named(over: dict[str, Any], expected: str) -> None:
    assert expected in _errors(_task(**over))


def test_every_problem_is_reported_at_once() -> None:
    text = _errors(_task(name="X", budget="wall=x", benchmarks=[_bench(scorer="nope")]))
    assert "3 validation errors" in text
    assert "benchmarks.0.scorer" in text


def test_open_general_needs_no_goal() -> None:
    assert Task.model_validate(_task(goal="", setting="open-general")).goal == ""


def test_split_sources_are_validated() -> None:
    missing = _errors(_task(benchmarks=[_bench(samples={"kind": "files", "files": {"dev": "d"}})]))
    assert "missing split(s): train, accept, final" in missing
    fractions = {"train": 0.5, "dev": 0.5, "accept": 0.1, "final": 0.1}
    assert "sum to 1.2" in _errors(
        _task(benchmarks=[_bench(samples={"kind": "pool", "pool": "p", "fractions": fractions})])
    )
    with pytest.raises(ValidationError, match="exactly one of 'pool'"):
        PoolSplits()


def test_budget_text_forms() -> None:
    assert parse_budget("experiments=40,wall=20m,tokens=2M") == {
        "experiments": 40,
        "wall_s": 1200.0,
        "tokens": 2_000_000,
    }
    assert Budget.model_validate("wall=1.5h,tokens=500k").wall_s == 5400
    assert Budget.model_validate({"wall": "90s"}).wall_s == 90
    assert str(Budget.model_validate("experiments=3")) == "experiments=3,wall=1200s,tokens=2000000"


@pytest.mark.parametrize(
    ("knob", "expected"),
    [
        ({"type": "float", "low": 1, "high": 0, "default": 0.5}, "needs low < high"),
        ({"type": "float", "low": 0, "high": 1, "log": True, "default": 0.5}, "needs low > 0"),
        ({"type": "int", "low": 0, "high": 10, "default": 2.5}, "must be an integer"),
        ({"type": "int", "low": 0, "high": 10, "default": 11}, "outside [0.0, 10.0]"),
        ({"type": "choice", "choices": ["a"], "default": "b"}, "not in choices"),
        ({"type": "choice", "default": "b"}, "needs choices"),
        ({"type": "bool", "default": 1}, "true/false default"),
        ({"type": "angle", "default": 1}, "'float', 'int', 'choice' or 'bool'"),
    ],
)
def test_bad_knobs_are_explained(knob: dict[str, Any], expected: str) -> None:
    with pytest.raises(ValidationError, match=expected.replace("[", r"\[").replace(".", r"\.")):
        Knob.model_validate({"name": "k", **knob})


def test_search_space_defaults_form_a_config() -> None:
    task = Task.model_validate(
        _task(search_space=[{"name": "lr", "type": "float", "low": 0, "high": 1, "default": 0.1}])
    )
    assert task.default_config() == {"lr": 0.1}
    with pytest.raises(KeyError, match="has no benchmark 'x'; it has: b"):
        task.benchmark("x")


def test_a_pool_can_come_from_python() -> None:
    bench = Benchmark(name="b", scorer="accuracy", target=True, samples=PoolSplits(build=list))
    task = Task(name="t", goal="g", harness=Path("h"), benchmarks=[bench])
    assert "build" not in task.model_dump()["benchmarks"][0]["samples"]


def test_a_knob_says_what_keeps_a_value_from_being_one_of_its_values() -> None:
    epochs = Knob(name="epochs", type="int", low=1, high=50, default=5)
    assert [epochs.misfit(v) for v in (5, 5.0, 1, 50)] == [None] * 4  # JSON may write 5.0
    assert epochs.misfit(5.5) == "not an integer"
    assert epochs.misfit(True) == "not an integer"
    assert epochs.misfit("5") == "not an integer"
    assert epochs.misfit(0) == "outside [1, 50]"
    lr = Knob(name="lr", type="float", low=1e-4, high=1.0, log=True, default=0.1)
    assert lr.misfit(float("nan")) == "outside [0.0001, 1]"
    assert lr.misfit(None) == "not a number"
    flag = Knob(name="flag", type="bool", default=False)
    assert flag.misfit(0) == "not true or false" and flag.misfit(True) is None
    kind = Knob(name="kind", type="choice", choices=["a", 1], default="a")
    assert kind.misfit(1) is None and kind.misfit("1") == "not one of ['a', 1]"
