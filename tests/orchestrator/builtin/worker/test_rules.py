"""The built-in Worker's proposals, and one simulated search on synthetic's known truth."""

from __future__ import annotations

import random
import statistics

import pytest
from pydantic import JsonValue

from rsilab.orchestrator.builtin.worker._rules import (
    SearchSettings,
    config_key,
    is_valid,
    propose_configs,
    step_size,
)
from rsilab.tasks import Knob, KnobCondition
from rsilab.tasks.builtin.synthetic import SEARCH_SPACE, noise_sd, true_score

SPACE = [
    *SEARCH_SPACE,
    Knob(name="fused", type="bool", default=False),
    Knob(name="ratio", type="float", low=0.5, high=2.0, default=1.0),
]
DEFAULT: dict[str, JsonValue] = {k.name: k.default for k in SPACE}


def test_proposals_are_valid_typed_and_in_bounds() -> None:
    rng = random.Random(0)
    configs = propose_configs(SPACE, [(DEFAULT, 0.5)], rng, 300)
    assert len(configs) == 300
    for config in configs:
        assert is_valid(config, SPACE), config
        assert set(config) == {k.name for k in SPACE}
        assert isinstance(config["width"], int) and not isinstance(config["width"], bool)
        assert isinstance(config["epochs"], int)
        assert isinstance(config["lr"], float)
        assert isinstance(config["fused"], bool)
        assert config["optimizer"] in ("sgd", "adam")


def test_no_config_is_proposed_twice_nor_a_tried_one() -> None:
    rng = random.Random(1)
    tried = {config_key({**DEFAULT, "optimizer": "adam"}, SPACE)}
    configs = propose_configs(SPACE, [(DEFAULT, 0.5)], rng, 200, tried=tried)
    keys = [config_key(c, SPACE) for c in configs]
    assert len(set(keys)) == len(keys)
    assert config_key(DEFAULT, SPACE) not in keys
    assert not tried & set(keys)


def test_a_small_discrete_space_runs_out_instead_of_repeating() -> None:
    space = [
        Knob(name="flag", type="bool", default=True),
        Knob(name="kind", type="choice", choices=["a", "b", "c"], default="a"),
    ]
    start: dict[str, JsonValue] = {"flag": True, "kind": "a"}
    configs = propose_configs(space, [(start, 0.0)], random.Random(2), 10)
    assert len(configs) == 5  # 2 x 3 configs, one of them tried
    assert len({config_key(c, space) for c in configs}) == 5


def test_same_seed_same_proposals() -> None:
    parents: list[tuple[dict[str, JsonValue], float]] = [(DEFAULT, 0.5)]
    first = propose_configs(SPACE, parents, random.Random(7), 20)
    again = propose_configs(SPACE, parents, random.Random(7), 20)
    assert first == again
    assert first != propose_configs(SPACE, parents, random.Random(8), 20)


def test_mutation_changes_one_or_two_knobs_of_the_only_parent() -> None:
    settings = SearchSettings(explore=0.0, recombine=0.0)
    configs = propose_configs(SPACE, [(DEFAULT, 0.5)], random.Random(3), 100, settings=settings)
    for config in configs:
        changed = [k for k in DEFAULT if config[k] != DEFAULT[k]]
        assert 1 <= len(changed) <= 2, changed


def test_recombination_takes_every_knob_from_a_parent() -> None:
    other: dict[str, JsonValue] = {
        "lr": 0.1, "width": 256, "dropout": 0.1, "epochs": 32, "optimizer": "adam",
        "fused": True, "ratio": 2.0,
    }  # fmt: skip
    settings = SearchSettings(explore=0.0, recombine=1.0)
    parents = [(DEFAULT, 0.5), (other, 0.6)]
    for config in propose_configs(SPACE, parents, random.Random(4), 50, settings=settings):
        assert all(config[k] in (DEFAULT[k], other[k]) for k in DEFAULT)


def test_step_shrinks_as_the_direction_matures() -> None:
    settings = SearchSettings(step=0.4, min_step=0.05, half_life=10.0)
    assert step_size(0, settings) == pytest.approx(0.4)
    assert step_size(10, settings) == pytest.approx(0.2)
    assert step_size(1000, settings) == pytest.approx(0.05)


def test_with_no_parents_the_defaults_come_first() -> None:
    configs = propose_configs(SPACE, [], random.Random(5), 3)
    assert configs[0] == DEFAULT
    assert all(is_valid(c, SPACE) for c in configs)


def test_invalid_configs_are_recognised_and_rejected_as_parents() -> None:
    assert is_valid({**DEFAULT, "extra": "ignored"}, SPACE)
    for bad in (
        {**DEFAULT, "lr": 2.0},
        {**DEFAULT, "width": 16.0},
        {**DEFAULT, "width": True},
        {**DEFAULT, "optimizer": "rmsprop"},
        {**DEFAULT, "fused": 0},
        {**DEFAULT, "lr": float("nan")},
        {k: v for k, v in DEFAULT.items() if k != "epochs"},
    ):
        assert not is_valid(bad, SPACE), bad
    with pytest.raises(ValueError, match="not valid"):
        propose_configs(SPACE, [({**DEFAULT, "lr": 2.0}, 0.5)], random.Random(0), 1)


# --- simulation on synthetic's known truth ------------------------------------------------------

BUDGET = 40
SEEDS = range(10)
SYNTH_DEFAULT: dict[str, JsonValue] = {k.name: k.default for k in SEARCH_SPACE}


def _observe(config: dict[str, JsonValue], noise: random.Random) -> float:
    """One simulated training run: the truth plus training-seed noise."""
    return true_score(config) + noise.gauss(0.0, noise_sd())


def _true_gain_of_best(history: list[tuple[dict[str, JsonValue], float]]) -> float:
    """True gain over the defaults of the config that *looked* best (as a policy would pick)."""
    best = max(history, key=lambda item: item[1])[0]
    return true_score(best) - true_score(SYNTH_DEFAULT)


def _builtin_search(seed: int) -> float:
    rng, noise = random.Random(seed), random.Random(10_000 + seed)
    history = [(SYNTH_DEFAULT, _observe(SYNTH_DEFAULT, noise))]
    for _ in range(BUDGET):
        (config,) = propose_configs(SEARCH_SPACE, history, rng, 1)
        history.append((config, _observe(config, noise)))
    return _true_gain_of_best(history)


def _random_search(seed: int) -> float:
    rng, noise = random.Random(seed), random.Random(10_000 + seed)
    history = [(SYNTH_DEFAULT, _observe(SYNTH_DEFAULT, noise))]
    explore = SearchSettings(explore=1.0)
    for _ in range(BUDGET):
        # A fresh uniform sample each time (explore=1.0 is pure random search).
        (config,) = propose_configs(SEARCH_SPACE, history, rng, 1, settings=explore)
        history.append((config, _observe(config, noise)))
    return _true_gain_of_best(history)


def test_simulated_search_beats_the_defaults_and_random_search() -> None:
    builtin = statistics.mean(_builtin_search(s) for s in SEEDS)
    random_ = statistics.mean(_random_search(s) for s in SEEDS)
    assert builtin >= 0.15, builtin
    assert builtin > random_, (builtin, random_)


def test_configs_that_differ_only_in_knobs_that_do_not_matter_share_a_key() -> None:
    """A learning rate is inert when nothing trains: two such configs run one system."""
    gated = [
        Knob(name="epochs", type="int", low=0, high=5, default=0),
        Knob(
            name="lr",
            type="float",
            low=1e-4,
            high=1.0,
            log=True,
            default=0.01,
            when=KnobCondition(knob="epochs", at_least=1),
        ),
    ]
    assert config_key({"epochs": 0, "lr": 0.5}, gated) == config_key(
        {"epochs": 0, "lr": 0.01}, gated
    )
    assert config_key({"epochs": 0, "lr": 0.5}, gated) == '{"epochs":0}'
    assert config_key({"epochs": 2, "lr": 0.5}, gated) != config_key(
        {"epochs": 2, "lr": 0.01}, gated
    )
    # propose_configs never offers the reference again under a new learning rate
    found = propose_configs(gated, [({"epochs": 0, "lr": 0.01}, 1.0)], random.Random(4), 6)
    assert all(c["epochs"] != 0 for c in found)
