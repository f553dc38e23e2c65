"""The race's reading of a config against the reference: the target paired by seed, the
non-targets on the mean of the config's runs."""

from __future__ import annotations

import pytest
from pydantic import JsonValue

from rsilab.orchestrator.builtin._state import NonTarget, Run, _weighed
from rsilab.orchestrator.builtin.main._race import contenders, next_race_config, winner

REF: dict[str, JsonValue] = {"epochs": 0}
STEADY: dict[str, JsonValue] = {"epochs": 3}
BROKEN: dict[str, JsonValue] = {"epochs": 9}
KEEP = [NonTarget("keep", 0.05)]  # the policy allows itself half of it on dev: 0.025


def _run(n: int, config: dict[str, JsonValue], seed: int, target: float, keep: float) -> Run:
    scores = {"target": target, "keep": keep}
    return Run(n, f"exp-{n}", "dir-1", config, target, False, scores, seed=seed)


def _campaign() -> list[Run]:
    raw = [
        _run(1, REF, 101, 0.20, 0.80),
        _run(2, STEADY, 101, 0.40, 0.79),  # within the margin
        _run(3, BROKEN, 101, 0.45, 0.74),
        _run(4, REF, 102, 0.22, 0.80),
        _run(5, STEADY, 102, 0.38, 0.73),  # 0.045 past the margin on this seed alone
        _run(6, BROKEN, 102, 0.43, 0.74),
    ]
    return _weighed(raw, ["exp-1"], KEEP)


def test_a_config_is_charged_for_its_mean_non_target_shortfall_not_each_runs() -> None:
    """STEADY's second run dips 0.07 on ``keep`` (0.045 past the margin: weighed alone, its
    score is 0.38 - 10 * 0.045 = -0.07, and the mean of the weighed runs' paired gains is
    negative); its mean dips 0.04, 0.015 past the margin, so it races with the target's paired
    gain 0.18 less 10 * 0.015. BROKEN dips 0.06 on both seeds and does not race."""
    runs = _campaign()
    assert runs[4].score == pytest.approx(-0.07)
    field = contenders(runs, REF, KEEP)
    assert [c.config for c in field] == [STEADY]
    assert field[0].gain == pytest.approx(0.18 - 10 * 0.015)
    found = winner(runs, REF, KEEP)
    assert found is not None and found.config == STEADY
    assert next_race_config(runs, REF, [], 1, 3, KEEP) == STEADY


def test_without_the_non_targets_the_target_gain_alone_decides() -> None:
    runs = _campaign()
    field = contenders(runs, REF, [])
    assert [c.config for c in field] == [BROKEN, STEADY]
    assert field[0].gain == pytest.approx(0.23)
