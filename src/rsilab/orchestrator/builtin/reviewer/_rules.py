"""The built-in Reviewer: a paired comparison of two experiments' per-sample dev scores.

Score matrices are ``scores[seed][sample]`` as in :mod:`rsilab.stats`, higher is better, the
same samples in the same column order in both. The *noise floor* is how far two runs of the
same config drift apart by training-seed chance alone (:func:`~rsilab.stats.noise_floor_from`):
a gain below it is not evidence even when its sample interval clears zero (one-seed runs carry
no seed term).
"""

from __future__ import annotations

from dataclasses import dataclass

from rsilab.records import Interval, Recommendation, Verdict
from rsilab.stats import ScoreMatrix, paired_gain


@dataclass(frozen=True)
class ReviewFinding:
    """A reviewer's reading of one comparison, ready for a ``Review`` record."""

    verdict: Verdict
    recommendation: Recommendation
    effect: Interval
    """Mean(a) - mean(b) with its paired interval."""
    within_noise: bool
    """True when ``|effect|`` is below the decision threshold (see :func:`review_pair`)."""
    text: str
    """One-sentence rationale, with the numbers."""


def review_pair(
    a: ScoreMatrix,
    b: ScoreMatrix,
    *,
    noise_floor: float,
    level: float = 0.95,
    verified: bool = False,
) -> ReviewFinding:
    """Compare candidate ``a`` with reference ``b`` (its parent or the baseline).

    The effect is :func:`~rsilab.stats.paired_gain` ``(a, b, level)``; the threshold
    is ``max(noise_floor, half-width of its interval)``.

    - ``|effect| < threshold``: inconclusive, within noise. Verified (``a`` is the fresh-seed
      re-runs): recommend ``stop``, the gain did not hold. Otherwise ``verify`` when the
      effect still exceeds the noise floor (a gain too uncertain to judge: more seeds decide),
      else ``continue`` (nothing to verify yet: keep searching).
    - ``effect >= threshold``: supports; ``verify`` unless ``verified`` (the gain already held
      on fresh seeds), then ``continue``.
    - ``effect <= -threshold``: refutes; recommend ``revise`` (the change made things worse).

    Every recommendation names a move the Main agent can make on the direction next.

    ``ValueError`` for a negative noise floor and whatever ``paired_gain`` rejects.
    """
    if not noise_floor >= 0.0:
        raise ValueError(f"noise_floor must be >= 0, got {noise_floor!r}")
    effect = paired_gain(a, b, level)
    half = (effect.high - effect.low) / 2.0
    threshold = max(noise_floor, half)
    numbers = (
        f"effect {effect.value:+.4f} [{effect.low:+.4f}, {effect.high:+.4f}] at {level:.0%}, "
        f"noise floor {noise_floor:.4f}"
    )
    if abs(effect.value) < threshold:
        if verified:
            rec, why = Recommendation.STOP, "the gain did not hold on fresh seeds; stop here"
        elif effect.value > noise_floor:
            rec, why = Recommendation.VERIFY, "re-run with more seeds before deciding"
        else:
            rec, why = Recommendation.CONTINUE, "nothing to verify yet; keep searching"
        return ReviewFinding(
            Verdict.INCONCLUSIVE, rec, effect, True, f"Within noise: {numbers}; {why}."
        )
    if effect.value > 0.0:
        rec = Recommendation.CONTINUE if verified else Recommendation.VERIFY
        why = "already verified; build on it" if verified else "verify with fresh seeds"
        return ReviewFinding(Verdict.SUPPORTS, rec, effect, False, f"Gain: {numbers}; {why}.")
    return ReviewFinding(
        Verdict.REFUTES,
        Recommendation.REVISE,
        effect,
        False,
        f"Loss: {numbers}; revise the hypothesis.",
    )


def clearly_better(a: ScoreMatrix, b: ScoreMatrix, *, noise_floor: float) -> bool:
    """True when :func:`review_pair` finds that ``a`` supports a gain over ``b`` (the paired
    gain above both ``noise_floor`` and the half-width of its interval), or when the two cannot
    be compared sample by sample (``paired_gain`` rejects them: fewer than two samples, or
    different samples): then nothing here holds a gain back, and the caller's point estimate
    decides. Scores are oriented so that higher is better."""
    try:
        finding = review_pair(a, b, noise_floor=noise_floor)
    except ValueError:
        return True
    return finding.verdict is Verdict.SUPPORTS
