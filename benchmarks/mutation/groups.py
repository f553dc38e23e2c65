"""What ``make mutate`` mutates, and the tests each part is judged by.

A :class:`Group` names modules of security- or decision-critical code and the few test files
that exercise them: only those tests run against its mutants, so the whole run takes minutes.
Keep each list short and fast; a test file that needs jobs in a sandbox belongs elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Group:
    """Modules mutated together and the test files that must kill their mutants."""

    name: str
    modules: tuple[str, ...]
    """Source files, relative to the repository root."""
    tests: tuple[str, ...]
    """Test files (or node ids), relative to the repository root."""


GROUPS = (
    Group(
        "permissions",
        ("src/rsilab/expos/policy.py",),
        ("tests/expos/test_policy.py", "tests/expos/test_permission_matrix.py"),
    ),
    Group(
        "tool guards",
        ("src/rsilab/expos/guards.py",),
        (
            "tests/expos/test_guards.py",
            "tests/expos/test_dispatch.py",
            "tests/expos/tools/test_workspace.py",
        ),
    ),
    Group(
        "controller guards",
        ("src/rsilab/controller/guards.py",),
        ("tests/controller/test_guards.py",),
    ),
    Group(
        "acceptance",
        ("src/rsilab/controller/acceptance.py",),
        ("tests/controller/test_acceptance.py",),
    ),
    Group(
        "ledger verification",
        ("src/rsilab/store/ledger.py", "src/rsilab/store/verify.py"),
        (
            "tests/store/test_tamper.py",
            "tests/store/test_verify.py",
            "tests/store/test_conformance.py",
        ),
    ),
)
"""The parts ``make mutate`` covers (issue 21, item 7)."""

TARGET = 0.90
"""Share of mutants the tests must kill in every group."""

EQUIVALENT: dict[tuple[str, str], str] = {}
"""(function, diff) of a surviving mutant -> why no test can tell it from the code."""
