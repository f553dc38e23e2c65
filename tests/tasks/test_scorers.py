"""Scorers: per-sample scores, invalid outputs, crashes turned into data, the registry."""

from __future__ import annotations

import math

import pytest

from rsilab.tasks import Sample, Scored, get_scorer, register_scorer, score_outputs, scorer_names

S = Sample(id="a", input=[1], target=3)


def test_accuracy_and_exact_match() -> None:
    assert get_scorer("accuracy").fn(S, 3).score == 1.0
    assert get_scorer("accuracy").fn(S, "3").score == 0.0
    assert get_scorer("exact_match").fn(S, " 3 ").score == 1.0


def test_speedup_needs_a_valid_timed_output() -> None:
    fn = get_scorer("speedup").fn
    good = fn(S, {"valid": True, "t_reference": 2.0, "t_candidate": 0.5})
    assert good == Scored("a", 4.0, True, "")
    wrong = fn(S, {"valid": False, "note": "wrong output at n=512"})
    assert (wrong.score, wrong.valid, wrong.note) == (0.0, False, "wrong output at n=512")
    assert not fn(S, {"valid": True, "t_reference": 1.0, "t_candidate": 0}).valid
    assert not fn(S, {"valid": True}).valid
    assert not fn(S, [1, 2]).valid


def test_squared_error_is_lower_better() -> None:
    info = get_scorer("squared_error")
    assert not info.higher_is_better
    assert info.fn(S, 1).score == 4.0
    assert info.fn(S, "x") == Scored("a", math.inf, False, "output is not a number")


def test_score_outputs_marks_missing_and_crashing() -> None:
    @register_scorer("test_crashy")
    def crashy(sample: Sample, output: object) -> Scored:
        """Always fails."""
        raise RuntimeError("boom")

    samples = [S, Sample(id="b", input=[2], target=1)]
    missing = score_outputs("accuracy", samples, {"a": 3})
    assert [r.valid for r in missing] == [True, False]
    assert missing[1].note == "no output"
    crashed = score_outputs("test_crashy", samples[:1], {"a": 3})[0]
    assert not crashed.valid and "scorer failed: RuntimeError: boom" in crashed.note


def test_registry_refuses_a_second_function_under_one_name() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_scorer("accuracy")(lambda s, o: Scored(s.id, 0.0))
    with pytest.raises(KeyError, match=r"unknown scorer 'nope'; known: .*accuracy"):
        get_scorer("nope")
    assert {"accuracy", "exact_match", "speedup", "squared_error"} <= set(scorer_names())


def test_a_scorer_without_a_docstring_registers_with_an_empty_description(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A user's scorer function need not have a docstring (it used to crash registration)."""
    from rsilab.tasks import _scorers

    # Registered into a copy of the registry, so no later test in this process sees it.
    monkeypatch.setattr(_scorers, "_SCORERS", dict(_scorers._SCORERS))
    register_scorer("undocumented_for_test", higher_is_better=False)(
        lambda sample, output: Scored(sample.id, 1.0)
    )
    info = get_scorer("undocumented_for_test")
    assert (info.description, info.higher_is_better) == ("", False)
