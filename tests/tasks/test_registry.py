"""The @task registry: built-ins found on first use, names checked, duplicates refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from rsilab import Task, task
from rsilab.tasks import _registry, get_task, task_names


def _make(name: str) -> Task:
    return Task.model_validate(
        {
            "name": name,
            "goal": "g",
            "harness": "h",
            "benchmarks": [
                {
                    "name": "b",
                    "scorer": "accuracy",
                    "target": True,
                    "samples": {"kind": "pool", "pool": "p.jsonl"},
                }
            ],
        }
    )


def test_builtins_are_registered() -> None:
    assert {"digits", "kernel", "policy", "synthetic"} <= set(task_names())
    for name in ("digits", "kernel", "policy", "synthetic"):
        built = get_task(name)
        assert built.name == name and built.source == "builtin"
        assert built.harness.is_dir()
        kinds = {"leaked_test_data", "editable_evaluator"}
        if name != "policy":  # its outputs are configs; see rsilab.tasks.builtin.policy
            kinds |= {"hardcoded_outputs", "rebuildable_data"}
        assert {t.kind.value for t in built.traps} == kinds


def test_decorator_registers_by_function_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_registry, "_TASKS", dict(_registry._TASKS))

    @task
    def demo_task() -> Task:
        return _make("demo_task")

    assert "demo_task" in task_names()
    assert get_task("demo_task").harness == Path("h")


def test_a_factory_building_another_name_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_registry, "_TASKS", dict(_registry._TASKS))

    @task
    def liar() -> Task:
        return _make("honest")

    with pytest.raises(ValueError, match="built a task named 'honest'"):
        get_task("liar")


def test_the_same_name_from_another_module_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_registry, "_TASKS", dict(_registry._TASKS))

    def digits() -> Task:
        return _make("digits")

    digits.__module__ = "somewhere.else"
    with pytest.raises(ValueError, match=r"already registered by rsilab\.tasks\.builtin\.digits"):
        task(digits)


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(KeyError, match=r"unknown task 'nope'; known: .*digits"):
        get_task("nope")
