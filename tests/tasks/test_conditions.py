"""Conditional knobs: which knobs matter in a config, chains of conditions, the faults refused
when a task loads, and ``when`` in task.toml."""

from __future__ import annotations

import re
import tomllib
from importlib import resources
from pathlib import Path

import pytest
from pydantic import JsonValue, ValidationError

from rsilab.tasks import (
    Knob,
    KnobCondition,
    KnobType,
    Task,
    TaskLoadError,
    active_names,
    deciding_first,
    get_task,
    is_active,
    load_toml,
    with_deciding,
)
from tests.tasks.conftest import write_small_task

TRAINS = KnobCondition(knob="epochs", at_least=1)
SPACE = [
    Knob(name="epochs", type=KnobType.INT, low=0, high=10, default=0),
    Knob(name="lora", type=KnobType.BOOL, default=False, when=TRAINS),
    Knob(
        name="rank",
        type=KnobType.CHOICE,
        choices=[4, 8],
        default=4,
        when=KnobCondition(knob="lora", one_of=[True]),
    ),
    Knob(name="decoding", type=KnobType.CHOICE, choices=["greedy", "sample"], default="greedy"),
    Knob(
        name="temperature",
        type=KnobType.FLOAT,
        low=0.1,
        high=2.0,
        default=0.7,
        when=KnobCondition(knob="decoding", one_of=["sample"]),
    ),
]


def _task_with(knobs: list[Knob]) -> Task:
    """synthetic with ``knobs`` as its search space, validated as a task is when it loads."""
    task = get_task("synthetic")
    return Task(
        **{**{name: getattr(task, name) for name in Task.model_fields}, "search_space": knobs}
    )


def _config(**values: JsonValue) -> dict[str, JsonValue]:
    base: dict[str, JsonValue] = {
        "epochs": 0, "lora": False, "rank": 4, "decoding": "greedy", "temperature": 0.7,
    }  # fmt: skip
    return {**base, **values}


def test_a_knob_matters_when_its_condition_and_every_condition_above_it_hold() -> None:
    assert active_names(_config(), SPACE) == ["epochs", "decoding"]
    assert active_names(_config(epochs=3), SPACE) == ["epochs", "lora", "decoding"]
    # rank hangs on lora, which hangs on epochs: lora on but no training leaves rank inert
    assert not is_active(SPACE[2], _config(lora=True), SPACE)
    assert is_active(SPACE[2], _config(epochs=1, lora=True), SPACE)
    assert active_names(_config(decoding="sample"), SPACE) == ["epochs", "decoding", "temperature"]
    # a deciding knob the config leaves out is read at its default (epochs 0: nothing trains)
    assert active_names({"lora": True, "rank": 8}, SPACE) == ["epochs", "decoding"]


def test_at_least_reads_numbers_and_one_of_matches_type_and_value() -> None:
    assert TRAINS.holds(1) and TRAINS.holds(2.5) and not TRAINS.holds(0)
    assert not TRAINS.holds(True) and not TRAINS.holds("3")  # a bool or text is no count
    flag = KnobCondition(knob="lora", one_of=[True])
    assert flag.holds(True) and not flag.holds(1)  # 1 == True in Python, not here


@pytest.mark.parametrize(
    ("when", "problem"),
    [
        (KnobCondition(knob="steps", at_least=1), "its condition names 'steps', not a knob here"),
        (KnobCondition(knob="scale", at_least=1), "its condition names itself"),
        (
            KnobCondition(knob="mode", at_least=1),
            "at_least needs a numeric knob; 'mode' is a choice",
        ),
        (KnobCondition(knob="mode", one_of=["x", "z"]), "'mode' never takes ['z']"),
    ],
)
def test_a_condition_that_cannot_be_judged_is_refused(when: KnobCondition, problem: str) -> None:
    knobs = [
        Knob(name="mode", type=KnobType.CHOICE, choices=["x", "y"], default="x"),
        Knob(name="scale", type=KnobType.FLOAT, low=0.0, high=1.0, default=0.5, when=when),
    ]
    with pytest.raises(ValidationError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        _task_with(knobs)


def test_conditions_in_a_cycle_and_a_condition_without_one_rule_are_refused() -> None:
    a = Knob(name="a", type=KnobType.INT, low=0, high=3, default=0,
             when=KnobCondition(knob="b", at_least=1))  # fmt: skip
    b = Knob(name="b", type=KnobType.INT, low=0, high=3, default=0,
             when=KnobCondition(knob="a", at_least=1))  # fmt: skip
    with pytest.raises(ValidationError, match="knobs a -> b -> a: conditions form a cycle"):
        _task_with([a, b])
    with pytest.raises(ValidationError, match="exactly one of one_of, at_least"):
        KnobCondition(knob="a", one_of=[1], at_least=1)
    with pytest.raises(ValidationError, match="exactly one of one_of, at_least"):
        KnobCondition(knob="a")


def test_when_in_task_toml_loads_and_a_bad_one_names_its_field(tmp_path: Path) -> None:
    knobs = """
[[search_space]]
name = "epochs"
type = "int"
low = 0
high = 5
default = 0

[[search_space]]
name = "lr"
type = "float"
low = 0.001
high = 0.1
log = true
default = 0.01
when = { knob = "epochs", at_least = 1 }
"""
    task = load_toml(write_small_task(tmp_path / "good", toml_extra=knobs))
    assert task.search_space[1].when == KnobCondition(knob="epochs", at_least=1)
    assert active_names({"epochs": 0, "lr": 0.05}, task.search_space) == ["epochs"]
    bad = knobs.replace('when = { knob = "epochs", at_least = 1 }', 'when = { knob = "epochs" }')
    with pytest.raises(TaskLoadError) as info:
        load_toml(write_small_task(tmp_path / "bad", toml_extra=bad))
    assert "search_space.1.when" in str(info.value)
    assert "exactly one of one_of, at_least" in str(info.value)


def test_every_faulty_condition_is_named_in_one_pass_beside_other_fields(tmp_path: Path) -> None:
    """Before, conditions were checked only once every field was valid, and stopped at the
    first fault: four faults took four rounds of `task check`."""

    def knob(name: str, kind: str, when: str) -> str:
        values = (
            'choices = ["x", "y"]\ndefault = "x"'
            if kind == "choice"
            else ("low = 0\nhigh = 5\ndefault = 0")
        )
        return f'[[search_space]]\nname = "{name}"\ntype = "{kind}"\n{values}\nwhen = {when}\n'

    knobs = "\n".join([
        '[[search_space]]\nname = "basis"\ntype = "choice"\nchoices = ["x", "y"]\ndefault = "x"\n',
        knob("degree", "int", '{ knob = "basis", at_least = 2 }'),
        knob("gamma", "int", '{ knob = "basis", one_of = ["cubic"] }'),
        knob("p", "int", '{ knob = "q", at_least = 1 }'),
        knob("q", "int", '{ knob = "p", at_least = 1 }'),
        knob("extra", "int", '{ knob = "nope", at_least = 1 }'),
    ])  # fmt: skip
    path = write_small_task(tmp_path / "t", toml_extra=knobs)
    path.write_text(path.read_text().replace('scorer = "accuracy"', 'scorer = "acuracy"'))
    with pytest.raises(TaskLoadError) as info:
        load_toml(path)
    said = "\n".join(info.value.problems)
    for fault in (
        "knob 'degree': at_least needs a numeric knob; 'basis' is a choice knob (use one_of)",
        "knob 'gamma': 'basis' never takes ['cubic'] (one of ['x', 'y'])",
        "knob 'extra': its condition names 'nope', not a knob here",
        "knobs p -> q -> p: conditions form a cycle",
        "acuracy",  # the other field's fault, in the same pass
    ):
        assert fault in said, said
    assert said.count("conditions form a cycle") == 1  # one cycle, said once
    assert "task.toml: search_space:" in said


def test_the_posttrain_recipe_knobs_matter_only_when_the_model_trains() -> None:
    task = get_task("posttrain")
    start = task.default_config()
    assert active_names(start, task.search_space) == [
        "epochs", "template", "few_shot", "decoding", "max_new_tokens",
    ]  # fmt: skip
    trained = {**start, "epochs": 2, "decoding": "sample"}
    assert {"lr", "lora_rank", "batch_size", "mix_arith", "temperature", "samples"} <= set(
        active_names(trained, task.search_space)
    )


def test_deciding_knobs_come_first_whatever_the_declaration_order() -> None:
    backwards = list(reversed(SPACE))  # temperature, decoding, rank, lora, epochs
    order = [k.name for k in deciding_first(backwards)]
    assert order == ["decoding", "epochs", "temperature", "lora", "rank"]
    outside = Knob(name="lr", type=KnobType.FLOAT, low=0.1, high=1.0, default=0.5, when=TRAINS)
    # a condition on a knob this space lacks ends the chain: the knob has nothing to wait for
    assert [k.name for k in deciding_first([outside, SPACE[3]])] == ["lr", "decoding"]


def test_a_knob_that_does_not_act_opens_with_the_chain_that_decides_it() -> None:
    # rank hangs on lora, which hangs on epochs: from a config that does not train, searching
    # rank alone changes nothing, so the whole chain opens with it, in the space's order
    assert with_deciding(["rank"], _config(), SPACE) == ["epochs", "lora", "rank"]
    assert with_deciding(["rank"], _config(epochs=2), SPACE) == ["lora", "rank"]
    assert with_deciding(["rank"], _config(epochs=2, lora=True), SPACE) == ["rank"]
    # only the link that breaks opens: lora is on already, the model does not train
    assert with_deciding(["rank"], _config(lora=True), SPACE) == ["epochs", "rank"]
    assert with_deciding(["temperature", "epochs"], _config(), SPACE) == [
        "epochs",
        "decoding",
        "temperature",
    ]
    # knobs that act already, and names the space lacks, are left as they are
    assert with_deciding(["decoding", "nope"], _config(), SPACE) == ["decoding", "nope"]


@pytest.mark.parametrize(
    ("knob", "problem"),
    [
        (
            {"type": "float", "low": 0.1, "high": 1.0, "default": 0.5, "weakest": 0.1},
            "needs `when`",
        ),
        (
            {"type": "float", "low": 0.1, "high": 1.0, "default": 0.5, "weakest": 2.0,
             "when": {"knob": "epochs", "at_least": 1}},
            "weakest 2 outside [0.1, 1]",
        ),
        (
            {"type": "int", "low": 0, "high": 8, "default": 1, "weakest": 0.5,
             "when": {"knob": "epochs", "at_least": 1}},
            "weakest must be an integer",
        ),
        (
            {"type": "choice", "choices": [1, 2], "default": 1, "weakest": 1.0,
             "when": {"knob": "epochs", "at_least": 1}},
            "needs a float or int knob",
        ),
    ],
)  # fmt: skip
def test_a_weak_end_is_refused_off_its_range_on_a_choice_or_without_when(
    knob: dict[str, object], problem: str
) -> None:
    with pytest.raises(ValidationError, match=re.escape(problem)):
        Knob.model_validate({"name": "lr", **knob})


def test_weakest_in_task_toml_loads_and_the_lm_template_declares_it() -> None:
    """The lm template's learning rate declares its low end (1e-5) as where a training moves
    the model least."""
    text = (resources.files("rsilab.tasks") / "templates" / "lm" / "task.toml").read_text()
    knobs_part = text[text.index("[[search_space]]") :]  # the part above holds placeholders
    knobs = {k["name"]: k for k in tomllib.loads(knobs_part)["search_space"]}
    assert Knob.model_validate(knobs["lr"]).weakest == 1e-5
