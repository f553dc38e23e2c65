"""The end-of-budget race: re-runs of the few best configs by successive halving, then one winner.

Pure functions over the view's runs. Instead of verifying every gain mid-run (re-runs of gains
later superseded), the policy searches until the last :func:`race_budget` experiments and spends
those on re-runs: first one re-run of the reference (so the head has
:data:`REFERENCE_RUNS` runs to compare against), then rungs of successive halving over the
contenders (distinct configs that beat the reference, paired by seed: the k-th runs of all
configs share a seed, :mod:`~rsilab.orchestrator.builtin._seeds`; a config's non-target
regression read from the mean of its runs, :func:`race_gain`), best first: the top ``k`` each
get a re-run, then the top ``ceil(k / 2)``, and so on down to one; slots left over go to the leader.
A config whose runs on two seeds measured exactly the same scores is *settled*
(:func:`~rsilab.orchestrator.builtin._seeds.settled`: its outcome does not depend on the seed)
and is never re-run: the race re-runs only the configs still in doubt, and ends, leaving the
experiments to the search, when every config of its rung is settled; on a deterministic task
that is a race without re-runs past the one each config needs to show it.
The rule is stateless: the next re-run is read from the runs recorded and running, so a resumed
campaign races on where it stopped. :func:`winner` is the config the policy then proposes, if
the Reviewer predicts the controller accepts it.

Scores are the view's (oriented so higher is better, non-target shortfalls weighed in).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from pydantic import JsonValue

from rsilab.orchestrator.builtin._seeds import config_text, paired_gain, settled
from rsilab.orchestrator.builtin._state import (
    NON_TARGET_PENALTY,
    NonTarget,
    Run,
    mean_scores,
    shortfall_of,
)

REFERENCE_RUNS = 2
"""Runs of the reference (the head's config) in a campaign: the first experiment, and one
re-run at the start of the race. No other experiment runs the reference's config again."""
RACE_SHARE = 0.25
"""Share of the experiment budget kept for the race."""
MAX_RACE = 10
"""The race never takes more experiments than this."""
MAX_CONTENDERS = 4
"""Configs that enter the race at most."""


def race_budget(budget: int) -> int:
    """Experiments kept for the race at the end of a campaign of ``budget`` experiments: none
    below 6 (nothing to race), else ``round(RACE_SHARE * budget)`` between 2 and
    :data:`MAX_RACE`."""
    if budget < 6:
        return 0
    return min(MAX_RACE, max(2, round(RACE_SHARE * budget)))


def rungs(slots: int) -> list[int]:
    """Rung sizes of successive halving for ``slots`` re-runs: ``[k, ceil(k/2), ..., 1]`` with
    the largest ``k <= MAX_CONTENDERS`` that fits, then one-config rungs for the slots left."""
    for k in range(MAX_CONTENDERS, 0, -1):
        plan = [k]
        while plan[-1] > 1:
            plan.append(math.ceil(plan[-1] / 2))
        if sum(plan) <= slots:
            return plan + [1] * (slots - sum(plan))
    return []


@dataclass(frozen=True)
class Contender:
    """One distinct config, its runs (oldest first) and its gain over the reference."""

    config: dict[str, JsonValue]
    runs: list[Run]
    gain: float = 0.0
    """How far its runs beat the reference's (:func:`race_gain`)."""

    @property
    def mean(self) -> float:
        return sum(r.score for r in self.runs) / len(self.runs)

    @property
    def latest(self) -> Run:
        return self.runs[-1]

    @property
    def settled(self) -> bool:
        """Its runs on two seeds measured the same: another run would repeat them."""
        return settled(self.runs, self.config)


def groups(runs: Sequence[Run]) -> list[Contender]:
    """The finished, non-failed runs grouped by their full config, in order of first run."""
    out: dict[str, Contender] = {}
    for run in runs:
        if not run.failed:
            key = config_text(run.config)
            out.setdefault(key, Contender(dict(run.config), [])).runs.append(run)
    return list(out.values())


def race_gain(
    runs: Sequence[Run], reference: Sequence[Run], non_targets: Sequence[NonTarget]
) -> float:
    """How far a config's ``runs`` beat the ``reference`` config's runs: the dev target's
    gain, paired by seed where they share seeds
    (:func:`~rsilab.orchestrator.builtin._seeds.paired_gain`), less
    :data:`~rsilab.orchestrator.builtin._state.NON_TARGET_PENALTY` per unit of the shortfall of
    the config's mean non-target scores against the reference's
    (:func:`~rsilab.orchestrator.builtin._state.shortfall_of`).

    Why means, not the runs' own weighed scores: the penalty is zero up to the margin and
    steep past it, so averaging it over runs charges a config for every run whose non-target
    dips past the margin by seed noise alone (on a dev set of 100 items, one sd of a score
    near 0.85 is 0.036, more than the margin); a second run is there to average that noise
    out, as the controller's own test of the non-targets does on the mean over seeds."""
    gain = paired_gain(
        [replace(r, score=r.target) for r in runs],
        [replace(r, score=r.target) for r in reference],
    )
    short = shortfall_of(mean_scores(runs), mean_scores(reference), non_targets)
    return gain - NON_TARGET_PENALTY * short


def contenders(
    runs: Sequence[Run], reference: Mapping[str, JsonValue], non_targets: Sequence[NonTarget]
) -> list[Contender]:
    """Configs other than ``reference`` that beat it (a positive :attr:`Contender.gain`, read
    against ``non_targets``: on the seeds both ran, a config that changes nothing gains
    exactly 0 and never races), best gain first (ties: the earlier config); [] when the
    reference has no run."""
    found = groups(runs)
    key = config_text(reference)
    ref = [g for g in found if config_text(g.config) == key]
    if not ref:
        return []
    better = []
    for g in found:
        if config_text(g.config) != key:
            gain = race_gain(g.runs, ref[0].runs, non_targets)
            if gain > 0.0:
                better.append(replace(g, gain=gain))
    return sorted(better, key=lambda g: -g.gain)


def next_race_config(
    runs: Sequence[Run],
    reference: Mapping[str, JsonValue],
    running: Sequence[Mapping[str, JsonValue]],
    slot: int,
    slots: int,
    non_targets: Sequence[NonTarget],
) -> dict[str, JsonValue] | None:
    """The config of race re-run number ``slot`` (0-based) of ``slots``: the reference while
    it has fewer than :data:`REFERENCE_RUNS` runs (recorded or ``running``), else the
    contender with the fewest runs among the top ``k`` of the slot's rung that is not settled
    (ties: the better one). None when nothing beats the reference (no race to run), or when
    every contender of the rung is settled (another run of one would repeat its scores)."""
    count: dict[str, int] = {}
    for config in running:
        count[config_text(config)] = count.get(config_text(config), 0) + 1
    key = config_text(reference)
    ref_runs = sum(1 for r in runs if not r.failed and config_text(r.config) == key)
    if ref_runs + count.get(key, 0) < REFERENCE_RUNS:
        return dict(reference)
    field = contenders(runs, reference, non_targets)
    if not field:
        return None
    plan = [1, *(k for k in rungs(slots - 1) for _ in range(k))]  # slot 0: the reference
    k = plan[min(slot, len(plan) - 1)]
    top = [g for g in field[: max(1, k)] if not g.settled]
    if not top:
        return None
    pick = min(
        range(len(top)),
        key=lambda i: (len(top[i].runs) + count.get(config_text(top[i].config), 0), i),
    )
    return dict(top[pick].config)


def winner(
    runs: Sequence[Run], reference: Mapping[str, JsonValue], non_targets: Sequence[NonTarget]
) -> Contender | None:
    """The config the race chose: among the contenders with the most runs and those settled
    (their gain is exact: no run was held back from them for being behind), the best gain
    (successive halving leaves the survivor with the most runs); None when none beats the
    reference (``non_targets`` as for :func:`contenders`)."""
    field = contenders(runs, reference, non_targets)
    if not field:
        return None
    most = max(len(g.runs) for g in field)
    return max((g for g in field if len(g.runs) == most or g.settled), key=lambda g: g.gain)
