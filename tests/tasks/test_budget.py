"""A budget's text form reads back to the same budget, whatever its figures."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rsilab.tasks import Budget


@given(
    experiments=st.integers(min_value=1, max_value=10**9),
    wall_s=st.floats(min_value=0.001, max_value=1e12, allow_nan=False),
    tokens=st.integers(min_value=1, max_value=10**15),
)
def test_the_text_form_reads_back(experiments: int, wall_s: float, tokens: int) -> None:
    budget = Budget(experiments=experiments, wall_s=wall_s, tokens=tokens)
    again = Budget.model_validate(str(budget))
    assert (again.experiments, again.tokens) == (experiments, tokens)
    assert math.isclose(again.wall_s, wall_s, rel_tol=1e-6, abs_tol=1e-6)
    assert "e+" not in str(budget) and "e-" not in str(budget)


@pytest.mark.parametrize("wall_s", [float("inf"), float("nan"), 0.0, 0.0001, -1.0])
def test_a_wall_that_cannot_be_written_back_is_refused(wall_s: float) -> None:
    with pytest.raises(ValueError, match="wall_s"):
        Budget(wall_s=wall_s)


def test_the_example_from_a_report() -> None:
    """300 hours printed as 1.08e+06 once, which nothing could read back."""
    assert str(Budget(experiments=2, wall_s=300 * 3600)) == (
        "experiments=2,wall=1080000s,tokens=2000000"
    )


@pytest.mark.parametrize(
    "text", ["experiments=3,experiments=5", "wall=1m,tokens=9,wall=2m", "tokens=1k, tokens=1k"]
)
def test_a_key_given_twice_is_refused_not_picked(text: str) -> None:
    """Before, the last one won: experiments=3,experiments=5 ran 5."""
    with pytest.raises(ValueError, match="given twice; give it once"):
        Budget.model_validate(text)
