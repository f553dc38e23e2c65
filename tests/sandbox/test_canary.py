"""Under CI the bubblewrap sandbox must work: a fallback would silently skip the escape suite."""

from __future__ import annotations

import os

import pytest

from tests.sandbox.helpers import bwrap_problem


def test_bwrap_sandbox_is_usable_under_ci() -> None:
    problem = bwrap_problem()
    if os.environ.get("CI") == "true":
        assert problem is None, f"CI must run the escape suite, but bwrap is unusable: {problem}"
    elif problem is not None:
        pytest.skip(f"bubblewrap is unusable here ({problem}); only CI requires it")
