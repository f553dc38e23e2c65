"""The built-in Main agent's decisions: which direction to work on next, and what to do with it.

Pure functions over :class:`DirectionStats`, a summary of a direction's reviewed evidence that
the caller builds from the records. Rewards are dev gains over the direction's parent (or the
baseline) squashed into (0, 1) by :func:`gain_reward`, so UCB1's exploration term has the scale
it was designed for.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

Move = Literal["continue", "verify", "branch", "revise", "stop"]
"""What the Main agent does with a direction next (the edges of the research DAG)."""

DEFAULT_C = 1.0
"""UCB exploration weight. Not yet tuned (needs a multi-direction simulation on synthetic)."""
DEFAULT_PATIENCE = 8
"""Experiments without a new best after which a direction counts as stagnating."""


@dataclass(frozen=True)
class DirectionStats:
    """What the Main agent knows of one direction.

    ``experiments`` counts finished experiments in the direction; ``last_improvement_at`` is
    the ordinal (1-based, in that count) of the experiment that last raised the direction's
    best dev score, 0 when none has. ``best_gain`` is that best's dev gain over the parent in
    score units; ``verified`` says a re-run with fresh seeds confirmed it; ``refuted`` says a
    review refuted the direction's evidence.
    """

    direction_id: str
    rewards: list[float] = field(default_factory=list)
    last_improvement_at: int = 0
    experiments: int = 0
    best_gain: float = 0.0
    verified: bool = False
    refuted: bool = False

    def mean_reward(self) -> float:
        """Mean of ``rewards``; 0.0 when there are none."""
        return sum(self.rewards) / len(self.rewards) if self.rewards else 0.0


def gain_reward(gain: float, scale: float) -> float:
    """``gain`` (score units, higher better) as a reward in (0, 1): ``0.5 + 0.5 tanh(g / s)``.

    ``scale`` is the gain that counts as large (for instance twice the noise floor): no gain
    gives 0.5, a gain of ``scale`` about 0.88, a loss of ``scale`` about 0.12. ``ValueError``
    unless ``scale > 0``.
    """
    if not scale > 0.0:
        raise ValueError(f"scale must be positive, got {scale!r}")
    return 0.5 + 0.5 * math.tanh(gain / scale)


def choose_direction(
    stats: Sequence[DirectionStats], total_experiments: int, c: float = DEFAULT_C
) -> str:
    """The id of the direction with the highest upper confidence bound (UCB1).

    A direction with no reward yet comes first (the first such in ``stats`` order); otherwise
    the score is ``mean_reward + c * sqrt(ln(total) / n)`` with ``n = len(rewards)`` and
    ``total = max(total_experiments, sum of n)``; ties go to the earlier direction. The caller
    passes only directions still open. ``ValueError`` when ``stats`` is empty.
    """
    if not stats:
        raise ValueError("no directions to choose from")
    for s in stats:
        if not s.rewards:
            return s.direction_id
    total = max(total_experiments, sum(len(s.rewards) for s in stats))
    log_total = math.log(max(total, 1))

    def bound(s: DirectionStats) -> float:
        return s.mean_reward() + c * math.sqrt(log_total / len(s.rewards))

    best = max(range(len(stats)), key=lambda i: (bound(stats[i]), -i))
    return stats[best].direction_id


def stagnating(stats: DirectionStats, patience: int = DEFAULT_PATIENCE) -> bool:
    """True when the last ``patience`` experiments brought no new best.

    ``experiments - last_improvement_at >= patience``: a direction that never improved
    stagnates once it has run ``patience`` experiments.
    """
    if patience < 1:
        raise ValueError(f"patience must be >= 1, got {patience}")
    return stats.experiments - stats.last_improvement_at >= patience


def next_move(
    stats: DirectionStats,
    *,
    noise_floor: float,
    budget: int,
    patience: int = DEFAULT_PATIENCE,
    verify: bool = True,
) -> Move:
    """The Main agent's next move on a direction; the first rule that applies wins.

    1. ``stop``: the direction has used its share of the budget (``experiments >= budget``);
       a gain still unverified then is left to the campaign's final verification.
    2. ``verify``: its best gain clears the noise floor (``best_gain > noise_floor``) and has
       not been verified with fresh seeds; verifying before building on a gain keeps the
       search from climbing on noise. Skipped with ``verify=False`` (when a Reviewer decides
       what to verify).
    3. ``revise``: stagnating and a review refuted its evidence (the hypothesis was wrong).
    4. ``branch``: stagnating without refutation (a plateau: try a sibling idea).
    5. ``continue``: otherwise.
    """
    if stats.experiments >= budget:
        return "stop"
    if verify and stats.best_gain > noise_floor and not stats.verified:
        return "verify"
    if stagnating(stats, patience):
        return "revise" if stats.refuted else "branch"
    return "continue"
