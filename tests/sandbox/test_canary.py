"""The bubblewrap sandbox must be usable wherever the suite runs: without it the escape suite
and the security tests would only skip, and a green run would say nothing about the boundary.
So an unusable bubblewrap fails the suite here, once, with the reason and what to do."""

from __future__ import annotations

from tests.sandbox.helpers import bwrap_problem


def test_bwrap_sandbox_is_usable() -> None:
    problem = bwrap_problem()
    assert problem is None, (
        f"bubblewrap is unusable here ({problem}); the security tests cannot run. Install it "
        "(`make install` does as root: apt-get install bubblewrap) and allow user namespaces"
    )
