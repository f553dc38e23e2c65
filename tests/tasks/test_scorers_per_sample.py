"""The per-sample scorers added for task authors: absolute error, chrF, pass@K.

Oracles are literals computed by hand (chrF) or a second computation (pass@k by enumerating
every k-subset of the generations).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest
from pydantic import JsonValue

from rsilab.tasks import Sample, chrf_score, get_scorer, pass_at_k, score_outputs, scorer_names


def _sample(target: JsonValue) -> Sample:
    return Sample(id="s", input=None, target=target)


def test_absolute_error_is_lower_better_and_refuses_non_numbers() -> None:
    info = get_scorer("absolute_error")
    assert not info.higher_is_better
    assert info.fn(_sample(3), 1.5).score == 1.5
    assert info.fn(_sample(-2), 2).score == 4.0
    bad = info.fn(_sample(3), "3")
    assert (bad.valid, bad.score) == (False, math.inf)
    assert not info.fn(_sample(3), True).valid


# Hand computation, whitespace removed, n-gram orders where both strings have n-grams:
# "abc" vs "abd": n=1 P=R=2/3, n=2 P=R=1/2, n=3 P=R=0 -> P=R=7/18 -> F=7/18.
# "ab" vs "abcd": n=1 P=1 R=2/4, n=2 P=1 R=1/3 (n=3: "ab" has none) -> P=1, R=5/12,
#   F = 5 * 1 * 5/12 / (4 * 1 + 5/12) = 25/53.
# "a b" vs "ab": spaces are removed -> identical -> 1.
@pytest.mark.parametrize(
    ("hypothesis", "reference", "expected"),
    [
        ("abc", "abd", Fraction(7, 18)),
        ("ab", "abcd", Fraction(25, 53)),
        ("a b", "ab", Fraction(1)),
        ("xyz", "abc", Fraction(0)),
        ("", "", Fraction(1)),
        ("", "ab", Fraction(0)),
    ],
)
def test_chrf_matches_hand_computed_values(
    hypothesis: str, reference: str, expected: Fraction
) -> None:
    assert chrf_score(hypothesis, reference) == pytest.approx(float(expected), abs=1e-12)


def test_chrf_scorer_needs_strings() -> None:
    info = get_scorer("chrf")
    assert info.higher_is_better
    assert info.fn(_sample("abd"), "abc").score == pytest.approx(7 / 18)
    assert not info.fn(_sample("abd"), 3).valid


def _enumerated(passes: list[bool], k: int) -> float:
    subsets = list(itertools.combinations(passes, k))
    return sum(1 for s in subsets if any(s)) / len(subsets)


@pytest.mark.parametrize(
    "passes",
    [
        [True, False, False, False, False],
        [False, True, False, True, False, False],
        [False] * 4,
        [True] * 3,
        [False, False, True],
    ],
)
def test_pass_at_k_equals_the_share_of_k_subsets_with_a_pass(passes: list[bool]) -> None:
    for k in range(1, len(passes) + 1):
        assert pass_at_k(len(passes), sum(passes), k) == pytest.approx(_enumerated(passes, k))
        info = get_scorer(f"pass@{k}")
        output: list[JsonValue] = list(passes)
        assert info.fn(_sample(None), output).score == pytest.approx(_enumerated(passes, k))


def test_pass_at_k_reads_n_and_c_and_refuses_too_few_generations() -> None:
    info = get_scorer("pass@2")
    assert info.fn(_sample(None), {"n": 4, "c": 1}).score == pytest.approx(0.5)
    few = info.fn(_sample(None), [True])
    assert (few.valid, few.score) == (False, 0.0)
    assert "at least 2 generations, got 1" in few.note
    assert not info.fn(_sample(None), {"n": 3, "c": 5}).valid
    assert not info.fn(_sample(None), "yes").valid


def test_pass_at_k_is_a_family_named_by_its_k() -> None:
    assert get_scorer("pass@10").higher_is_better
    with pytest.raises(KeyError, match="pass@K"):
        get_scorer("pass@0")
    with pytest.raises(KeyError):
        get_scorer("pass@x")
    assert {"absolute_error", "chrf", "exact_match", "squared_error"} <= set(scorer_names())


def test_scoring_a_missing_output_is_invalid_for_every_new_scorer() -> None:
    for name in ("absolute_error", "chrf", "pass@3"):
        (result,) = score_outputs(name, [_sample(1)], {})
        assert not result.valid and result.note == "no output"
