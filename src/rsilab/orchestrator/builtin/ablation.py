"""Ablations of the built-in policy: the same campaign with one part of the research removed.

They exist to measure what each part is worth (``benchmarks/bench_search.py``), as the
research that rsilab follows measured it; a campaign records its ablations in its settings
(``ablate``), so its records say which policy ran.

- :attr:`Ablation.REVIEWERS`: no Reviewer. Main decides from its own rule alone: it verifies a
  direction whose best gain clears the noise floor
  (:func:`~rsilab.orchestrator.builtin.main._rules.next_move` with ``verify=True``), and after the
  re-runs proposes when their mean beats the reference. No Review is filed.
- :attr:`Ablation.WORKERS`: no Workers. Main runs every experiment itself, one at a time, in
  one line of work over all the task's knobs: the directions a Main hands to Workers (a group
  of knobs each) are gone, and so is parallelism.
- :attr:`Ablation.TEMPERING`: no tempering. An infeasible dev gain (one that regresses a
  non-target beyond the policy's margin) is left to the sampler alone, not bisected back
  toward the reference (:mod:`~rsilab.orchestrator.builtin.main._temper`).

Removing the Experiment OS is not an ablation of this policy, which keeps its state in the
records the Experiment OS writes; the hacking suite runs the same Worker without it.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from rsilab.errors import UserError

__all__ = ["Ablation", "ablations_from", "ablations_setting"]


class Ablation(StrEnum):
    """A part of the built-in policy a campaign runs without (see the module docstring)."""

    REVIEWERS = "reviewers"
    WORKERS = "workers"
    TEMPERING = "tempering"


def ablations_from(text: str | None) -> frozenset[Ablation]:
    """The ablations of a campaign's ``ablate`` setting (comma-separated names; empty: none).

    Raises:
        UserError: a name is not an :class:`Ablation`.
    """
    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    known = {a.value for a in Ablation}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UserError(
            f"unknown ablation {', '.join(unknown)}: use any of {', '.join(sorted(known))}"
        )
    return frozenset(Ablation(n) for n in names)


def ablations_setting(ablations: Iterable[Ablation]) -> str:
    """The ``ablate`` setting of ``ablations``: their names, sorted, comma-separated."""
    return ",".join(sorted({Ablation(a).value for a in ablations}))
