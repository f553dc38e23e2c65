"""Common random numbers: the k-th run of any config uses the campaign's k-th seed.

An experiment's seed decides everything random in its jobs: the training's initialisation and
data order, a harness's few-shot draws, an environment's episodes. Drawn afresh for every
experiment, that randomness differs between any two runs, so comparing two configs compares
their seeds too: a config that changes nothing (a knob outside the range where it acts) scores
differently from the reference by seed noise alone, and a race re-run and a reference re-run
on different seeds cannot be paired. The built-in policy therefore gives the k-th run of a
config (counted over the runs recorded and running, failed ones included) the seed
``run_seed(campaign seed, k)``, shared by every config's k-th run. Two configs' runs on one seed
are a pair (:func:`paired_gain`): what they differ by is the configs' effect on that seed's
randomness, and a config that changes nothing differs by exactly 0. The controller draws its
own seeds, which the policy never sees (its verdict stays the judge of a proposal).

Orders from policies that do not choose a seed run on :func:`experiment_seed`, one per
experiment, as before.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

from pydantic import JsonValue

from rsilab.orchestrator.builtin._state import Run

SEED_STRIDE = 1000
"""Seeds one campaign's jobs may take: ``campaign seed * SEED_STRIDE`` plus 1 to 999 (the
campaign seed's bound, :data:`~rsilab.orchestrator.api.MAX_SEED`, keeps that below 2**31)."""


def experiment_seed(campaign_seed: int, n: int) -> int:
    """The seed of experiment ``n`` for a policy that gives each experiment its own."""
    return campaign_seed * SEED_STRIDE + n


def run_seed(campaign_seed: int, ordinal: int) -> int:
    """The seed of a config's ``ordinal``-th run (1-based), the same for every config."""
    if ordinal < 1:
        raise ValueError(f"run ordinals start at 1, not {ordinal}")
    return campaign_seed * SEED_STRIDE + ordinal


def config_text(config: Mapping[str, JsonValue]) -> str:
    """A config as one comparable string (key order does not matter)."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def next_seed(
    campaign_seed: int,
    config: Mapping[str, JsonValue],
    runs: Sequence[Run],
    running: Iterable[tuple[Mapping[str, JsonValue], int | None]],
) -> int:
    """The seed of the next run of ``config`` (its full config): the campaign's lowest run seed
    that no recorded run of it (``runs``, failed ones too) and no running one (``running``:
    (full config, seed) pairs) has taken. So two runs of one config never share a seed, and the
    k-th run of every config shares one."""
    key = config_text(config)
    taken = {r.seed for r in runs if r.seed is not None and config_text(r.config) == key}
    taken |= {seed for other, seed in running if seed is not None and config_text(other) == key}
    ordinal = 1
    while run_seed(campaign_seed, ordinal) in taken:
        ordinal += 1
    return run_seed(campaign_seed, ordinal)


def settled(runs: Sequence[Run], config: Mapping[str, JsonValue]) -> bool:
    """Whether ``config``'s outcome is known without another run: at least two of its
    finished runs, on different recorded seeds, measured exactly the same score on every
    benchmark, and none measured another. Such a config does not depend on the seed (a task
    whose scoring is deterministic, or a config where nothing random acts), so a re-run on a
    new seed can only repeat what is recorded: the policy spends no experiment on one."""
    key = config_text(config)
    mine = [r for r in runs if not r.failed and config_text(r.config) == key]
    if len({r.seed for r in mine if r.seed is not None}) < 2:
        return False  # one seed, or seeds not recorded: nothing says the seed does not matter
    first = _measured(mine[0])
    return all(_measured(r) == first for r in mine[1:])


def _measured(run: Run) -> tuple[tuple[str, float], ...]:
    """What a run measured: its dev score per benchmark (its target score for runs recorded
    before every benchmark's was kept)."""
    return tuple(sorted(run.scores.items())) or (("", run.target),)


def shared_seeds(runs: Sequence[Run], reference: Sequence[Run]) -> list[tuple[Run, Run]]:
    """(run, reference run) pairs on the same seed, lowest seed first; failed runs and runs
    without a recorded seed take no part."""
    ref = {r.seed: r for r in reference if r.seed is not None and not r.failed}
    pairs = [(r, ref[r.seed]) for r in runs if not r.failed and r.seed in ref]
    return sorted(pairs, key=lambda p: p[0].seed or 0)


def paired_gain(runs: Sequence[Run], reference: Sequence[Run]) -> float:
    """How far ``runs`` beat ``reference`` (the view's scores, higher better): the mean
    difference over the seeds both have run, else, with no seed shared (runs recorded before
    seeds were, or by a policy that does not share them), the difference of the two means.
    ValueError when either side has no finished run."""
    pairs = shared_seeds(runs, reference)
    if pairs:
        return sum(a.score - b.score for a, b in pairs) / len(pairs)
    mine = [r.score for r in runs if not r.failed]
    theirs = [r.score for r in reference if not r.failed]
    if not mine or not theirs:
        raise ValueError("a gain needs a finished run on both sides")
    return sum(mine) / len(mine) - sum(theirs) / len(theirs)
