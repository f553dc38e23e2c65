"""Best-so-far curves of a campaign, per benchmark, read from the controller's dev scores.

An experiment's score on a benchmark is the mean of the controller's dev evaluations of it
(what ``rsilab report`` shows as best dev). The curve is the best such score among the
experiments so far, in the direction the benchmark prefers, by experiments used and by time
since the campaign started (when the score was recorded). Accepted versions are marked at the
experiment their candidate came from, and at the moment the controller accepted them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from rsilab.records import Candidate, CandidateState, DataTier, Evaluation, Experiment
from rsilab.store import Store


@dataclass(frozen=True)
class AcceptedPoint:
    """An accepted version drawn on a curve."""

    label: str
    experiment_id: str | None
    ordinal: int | None
    seconds: float | None
    dev_score: float | None


@dataclass
class BenchmarkCurve:
    """One benchmark's scores in experiment order and in time."""

    benchmark: str
    higher_is_better: bool
    by_experiment: list[tuple[float, float]] = field(default_factory=list)
    """(ordinal from 1, the experiment's own score), for experiments that have one."""
    by_time: list[tuple[float, float]] = field(default_factory=list)
    """(seconds since the campaign started, score), in time order."""
    accepted: list[AcceptedPoint] = field(default_factory=list)

    def best_so_far(self, points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
        """The running best of ``points`` (x ascending), in the benchmark's direction."""
        out: list[tuple[float, float]] = []
        best: float | None = None
        for x, y in sorted(points):
            if best is None or (y > best if self.higher_is_better else y < best):
                best = y
            out.append((x, best))
        return out


def seconds_between(start: str, end: str) -> float:
    """Seconds from ``start`` to ``end`` (ISO-8601 texts)."""
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def campaign_curves(
    store: Store,
    campaign_id: str,
    started_at: str,
    experiments: Sequence[Experiment],
    candidates: Sequence[Candidate],
    labels: dict[str, str],
    higher: dict[str, bool],
) -> list[BenchmarkCurve]:
    """The curves of every benchmark some experiment of the campaign was dev-scored on.

    ``experiments`` in creation order; ``labels`` maps an accepted candidate's id to its
    version's label; ``higher`` says per benchmark whether higher is better (default yes).
    """
    ordinal = {e.id: i + 1 for i, e in enumerate(experiments)}
    sums: dict[tuple[str, str], list[float]] = {}
    first_at: dict[tuple[str, str], str] = {}
    for ev in store.query_as(Evaluation, campaign_id=campaign_id):
        if ev.tier != DataTier.DEV or not ev.samples or ev.subject_id not in ordinal:
            continue
        key = (ev.benchmark, ev.subject_id)
        bucket = sums.setdefault(key, [0.0, 0.0])
        bucket[0] += sum(s.score for s in ev.samples)
        bucket[1] += len(ev.samples)
        first_at.setdefault(key, ev.created_at)
    curves: dict[str, BenchmarkCurve] = {}
    for (bench, exp_id), (total, count) in sums.items():
        curve = curves.setdefault(bench, BenchmarkCurve(bench, higher.get(bench, True)))
        score = total / count
        curve.by_experiment.append((float(ordinal[exp_id]), score))
        curve.by_time.append((seconds_between(started_at, first_at[(bench, exp_id)]), score))
    for curve in curves.values():
        curve.by_experiment.sort()
        curve.by_time.sort()
        own = {int(x): y for x, y in curve.by_experiment}
        for cand in candidates:
            if cand.state != CandidateState.ACCEPTED:
                continue
            at = ordinal.get(cand.experiment_id or "")
            decided = cand.finished_at
            curve.accepted.append(
                AcceptedPoint(
                    label=labels.get(cand.id, cand.id),
                    experiment_id=cand.experiment_id,
                    ordinal=at,
                    seconds=seconds_between(started_at, decided) if decided else None,
                    dev_score=own.get(at) if at is not None else None,
                )
            )
    return [curves[name] for name in sorted(curves)]
