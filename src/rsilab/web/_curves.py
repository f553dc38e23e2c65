"""Best-so-far curves of a campaign, per benchmark, from the controller's dev scores.

An experiment's dev score on a benchmark is its last controller dev value
(:meth:`~rsilab.records.Experiment.last_metric`: the controller's dev evaluations are synced
into the experiment's metrics, one per evaluation, each the mean over its samples), the same
number the agents are shown. The curve is the best such score among the experiments so far,
in the direction the benchmark prefers, by experiments used and by time since the campaign
started (when the score was recorded). Accepted versions are marked at the experiment their
candidate came from, and at the moment the controller accepted them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from rsilab.records import Candidate, CandidateState, Experiment, MetricSource
from rsilab.stats import better


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
            if best is None or better(y, best, higher_is_better=self.higher_is_better):
                best = y
            out.append((x, best))
        return out


def seconds_between(start: str, end: str) -> float:
    """Seconds from ``start`` to ``end`` (ISO-8601 texts)."""
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


@dataclass(frozen=True)
class DevScore:
    """An experiment's dev score on one benchmark and when it was recorded."""

    mean: float
    """The score: the mean over the samples of the experiment's last controller evaluation."""
    seconds: float
    """Seconds from the campaign's start to that evaluation."""


DevCache = dict[str, tuple[int, dict[str, DevScore]]]
"""Experiment id -> (the revision read, its scores): an experiment's scores change only with
its revision, so a re-read after a new event recomputes only the experiments written."""


def dev_scores(
    experiments: Sequence[Experiment], started_at: str, cache: DevCache | None = None
) -> dict[str, dict[str, DevScore]]:
    """experiment id -> benchmark -> its dev score, from the controller's synced metrics."""
    cache = {} if cache is None else cache
    out: dict[str, dict[str, DevScore]] = {}
    for exp in experiments:
        known = cache.get(exp.id)
        if known is None or known[0] != exp.rev:
            known = (exp.rev, _scores_of(exp, started_at))
            cache[exp.id] = known
        if known[1]:
            out[exp.id] = known[1]
    return out


def _scores_of(exp: Experiment, started_at: str) -> dict[str, DevScore]:
    names = sorted({m.name for m in exp.metrics if m.source is MetricSource.CONTROLLER})
    last = {name: exp.last_metric(name) for name in names}
    return {
        name: DevScore(m.value, seconds_between(started_at, m.at))
        for name, m in last.items()
        if m is not None
    }


def campaign_curves(
    started_at: str,
    experiments: Sequence[Experiment],
    dev: dict[str, dict[str, DevScore]],
    candidates: Sequence[Candidate],
    labels: dict[str, str],
    higher: dict[str, bool],
) -> list[BenchmarkCurve]:
    """The curves of every benchmark some experiment has a dev score on.

    ``experiments`` in creation order; ``labels`` maps an accepted candidate's id to its
    version's label; ``higher`` says per benchmark whether higher is better (default yes).
    """
    curves: dict[str, BenchmarkCurve] = {}
    ordinal = {e.id: i + 1 for i, e in enumerate(experiments)}
    for exp in experiments:
        for bench, score in dev.get(exp.id, {}).items():
            curve = curves.setdefault(bench, BenchmarkCurve(bench, higher.get(bench, True)))
            curve.by_experiment.append((float(ordinal[exp.id]), score.mean))
            curve.by_time.append((score.seconds, score.mean))
    accepted = [c for c in candidates if c.state == CandidateState.ACCEPTED]
    for curve in curves.values():
        curve.by_time.sort()
        for cand in accepted:
            at = ordinal.get(cand.experiment_id or "")
            own = dev.get(cand.experiment_id or "", {}).get(curve.benchmark)
            curve.accepted.append(
                AcceptedPoint(
                    label=labels.get(cand.id, cand.id),
                    experiment_id=cand.experiment_id,
                    ordinal=at,
                    seconds=seconds_between(started_at, cand.finished_at)
                    if cand.finished_at
                    else None,
                    dev_score=own.mean if own is not None else None,
                )
            )
    return [curves[name] for name in sorted(curves)]
