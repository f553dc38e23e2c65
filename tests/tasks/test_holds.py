"""Knobs that hold a non-target (``holds``): what a task may declare, how task.toml says it, and
the built-in tasks that declare them."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from rsilab.tasks import Knob, KnobType, TaskLoadError, get_task, load_toml
from tests.tasks.conftest import synthetic_with, write_small_task


def test_a_numeric_knob_may_hold_a_non_target() -> None:
    knob = Knob(
        name="mix", type=KnobType.FLOAT, low=0.0, high=2.0, default=1.0, holds=["robustness"]
    )
    assert synthetic_with([knob]).search_space[0].holds == ["robustness"]


@pytest.mark.parametrize(
    ("knob", "said"),
    [
        (
            Knob(name="mix", type=KnobType.FLOAT, low=0, high=2, default=1, holds=["quality"]),
            "knob 'mix' holds 'quality', which is not a non-target benchmark "
            "(non-targets: robustness)",
        ),
        (
            Knob(name="mix", type=KnobType.INT, low=0, high=2, default=1, holds=["robustnes"]),
            "knob 'mix' holds 'robustnes', which is not a non-target benchmark",
        ),
        (
            Knob(
                name="mix",
                type=KnobType.FLOAT,
                low=0,
                high=2,
                default=1,
                holds=["robustness", "robustness"],
            ),
            "knob 'mix' holds 'robustness' twice",
        ),
        (
            Knob(
                name="style",
                type=KnobType.CHOICE,
                choices=["a", "b"],
                default="a",
                holds=["robustness"],
            ),
            "knob 'style': only a numeric knob can hold a benchmark",
        ),
    ],
)
def test_a_knob_holding_the_target_an_unknown_benchmark_twice_or_by_choice_is_refused(
    knob: Knob, said: str
) -> None:
    with pytest.raises(ValidationError) as info:
        synthetic_with([knob])
    assert said in str(info.value)


def test_task_toml_declares_what_a_knob_holds_and_names_a_wrong_one(tmp_path: Path) -> None:
    extra = """
[[benchmarks]]
name = "kept"
scorer = "accuracy"
tolerance = 0.1
splits = { train = "data/train.jsonl", dev = "data/dev.jsonl", accept = "data/accept.jsonl", final = "data/final.jsonl" }

[[search_space]]
name = "mix_kept"
type = "float"
low = 0.0
high = 3.0
default = 1.0
holds = ["kept"]
"""  # noqa: E501
    path = write_small_task(tmp_path / "ok", toml_extra=extra)
    task = load_toml(path)
    assert [(k.name, k.holds) for k in task.search_space] == [("mix_kept", ["kept"])]
    wrong = write_small_task(tmp_path / "wrong", toml_extra=extra.replace('["kept"]', '["kep"]'))
    with pytest.raises(TaskLoadError) as info:
        load_toml(wrong)
    assert "knob 'mix_kept' holds 'kep', which is not a non-target benchmark" in "\n".join(
        info.value.problems
    )


def test_posttrain_holds_each_non_target_with_its_own_data_and_all_of_them_with_replay() -> None:
    holds = {k.name: k.holds for k in get_task("posttrain").search_space if k.holds}
    assert holds == {
        "mix_fncall": ["fncall"],
        "mix_facts": ["facts"],
        "mix_choice": ["choice"],
        "mix_code": ["code"],
        "replay": ["fncall", "facts", "choice", "code"],
    }
