"""Mutation testing of the security- and decision-critical code (``make mutate``).

:mod:`.groups` names the modules and the tests that judge them; :mod:`._mutmut` runs mutmut
over each group; :mod:`._data` mutates the module-level tables mutmut cannot reach. The
verdicts are kept in :data:`RESULTS`, which ``benchmarks/bench_mutation.py`` turns into the
table in ``BENCHMARKS.md``. A survivor is either killed by a new test or listed in
:data:`benchmarks.mutation.groups.EQUIVALENT` with the reason no test can tell it apart.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.mutation.groups import EQUIVALENT

RESULTS = Path(__file__).resolve().parents[1] / "results" / "mutation.json"
"""The kept verdicts of the last ``make mutate``."""


def function_of(mutant: str) -> str:
    """``module.function`` (or ``module.Class.method``) that a mutmut mutant's name changes."""
    head = mutant.split("__mutmut_")[0]
    module, _, function = head.rpartition(".")
    return f"{module}.{function.removeprefix('x_').removeprefix('xǁ').replace('ǁ', '.')}"


def explained(mutant: str, diff: str) -> str | None:
    """Why a surviving mutant is equivalent to the code, when :data:`EQUIVALENT` lists the
    first line its ``diff`` (``- old`` and ``+ new`` lines) removes."""
    removed = next((line[2:] for line in diff.splitlines() if line.startswith("- ")), None)
    return EQUIVALENT.get((function_of(mutant), removed or ""))
