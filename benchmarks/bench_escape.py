"""Escape suite under BwrapSandbox: each attack, what should happen, what did.

The attacks are those of ``benchmarks/escape_attacks.py``, which the test suite also runs.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from benchmarks.escape_attacks import run_all
from rsilab.sandbox.base import SandboxUnavailable


def run(quick: bool) -> list[dict[str, Any]]:
    """One row per attack (the same in quick and full runs: they take seconds)."""
    try:
        with tempfile.TemporaryDirectory() as tmp:
            outcomes = run_all(Path(tmp))
    except SandboxUnavailable as exc:
        return [{"attack": "all", "expected": "contained", "observed": f"not run: {exc}"}]
    return [
        {
            "attack": o.attack,
            "expected": o.expected,
            "observed": o.observed,
            "contained": "yes" if o.contained else "NO",
        }
        for o in outcomes
    ]
