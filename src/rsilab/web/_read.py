"""What the pages show, read from the lab once per ledger position.

Reads go through a :class:`~rsilab.store.mirror.StoreMirror` that keeps the kinds of
record the pages scan (experiments, directions, candidates, ...) in memory and brings them up
to date from the ledger, so a page of a campaign with 10,000 experiments does not parse them
again. Every write appends a ledger event, so a view read at sequence ``n`` stays true until
the sequence moves: :class:`ViewCache` keeps the last views by (what, sequence), and
:class:`ReadCache` what stays true across positions. Nothing here writes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rsilab.controller.lineage import find_lineage, lineage_versions
from rsilab.orchestrator.report import (
    AcceptedReport,
    AssignmentItem,
    BenchmarkInfo,
    DirectionReport,
    FailureGroup,
    FlagsReport,
    VersionScores,
    accepted_reports,
    baseline_and_start,
    direction_reports,
    experiment_budget,
    failure_groups,
    flags_report,
    lineage_name,
    task_benchmarks,
    team_items,
    version_scores,
)
from rsilab.orchestrator.research.campaign_review import campaign_review_of
from rsilab.orchestrator.research.dag import ResearchDag
from rsilab.records import (
    BenchmarkDecision,
    Campaign,
    CampaignReview,
    Candidate,
    CandidateState,
    Experiment,
    ProtocolFlag,
    SystemVersion,
)
from rsilab.store import StoreReader
from rsilab.tasks import metric_order
from rsilab.web._curves import BenchmarkCurve, DevCache, DevScore, campaign_curves, dev_scores

T = TypeVar("T")

MIRRORED_KINDS = (
    "campaign",
    "direction",
    "experiment",
    "review",
    "candidate",
    "version",
    "lineage",
    "flag",
    "job",
    "assignment",
    "campaign_review",
    "finding",
    "adoption",
    "skill",
    "orientation",
)
"""Kinds the dashboard keeps in memory (with the ledger's events): those its pages scan.
Evaluations (large: a score per sample) are read from the store when a page needs them."""


@dataclass
class CampaignView:
    """One campaign as the campaign pages need it."""

    campaign: Campaign
    lineage: str
    benchmarks: list[BenchmarkInfo]
    experiments: list[Experiment]
    """In creation order."""
    candidates: list[Candidate]
    """In creation order."""
    versions: list[SystemVersion]
    """The lineage's versions, oldest first (empty when it has no baseline here)."""
    directions: list[DirectionReport]
    failures: list[FailureGroup]
    """Why experiments failed, each reason once (see
    :func:`rsilab.orchestrator.report.failure_groups`)."""
    baseline: VersionScores | None
    start: VersionScores | None
    accepted: list[AcceptedReport]
    flags: FlagsReport
    team: list[AssignmentItem]
    review: CampaignReview | None
    dev: dict[str, dict[str, DevScore]]
    """experiment id -> benchmark -> its dev score."""
    curves: list[BenchmarkCurve]

    @property
    def higher(self) -> dict[str, bool]:
        """Per benchmark: whether a higher score is better (known benchmarks only)."""
        return {b.name: b.higher_is_better for b in self.benchmarks}

    def order(self, names: Iterable[str]) -> list[str]:
        """``names`` of benchmarks in the order every table and chart shows them: the task's
        targets first (see :func:`rsilab.tasks.metric_order`)."""
        return metric_order(names, self.benchmarks)

    def ordered_decisions(self, decisions: Sequence[BenchmarkDecision]) -> list[BenchmarkDecision]:
        """A candidate's per-benchmark decisions in :meth:`order`."""
        place = {n: i for i, n in enumerate(self.order(d.benchmark for d in decisions))}
        return sorted(decisions, key=lambda d: place[d.benchmark])

    @property
    def budget(self) -> int | None:
        """Experiments the budget allows, when it names a number."""
        return experiment_budget(self.campaign.settings.get("budget"))

    @property
    def accepted_count(self) -> int:
        return sum(1 for c in self.candidates if c.state == CandidateState.ACCEPTED)

    @property
    def job_cpu_s(self) -> float:
        """CPU seconds of the experiments' jobs (the controller's own jobs not included)."""
        return sum(e.resources.cpu_s for e in self.experiments)

    def experiment_ordinal(self) -> dict[str, int]:
        """Experiment id -> its place in the campaign, from 1."""
        return {e.id: i + 1 for i, e in enumerate(self.experiments)}


@dataclass
class ReadCache:
    """What stays true between reads of a campaign, so a re-read after a new event redoes
    only what the event can have changed."""

    accepted: dict[str, AcceptedReport] = field(default_factory=dict)
    """Accepted versions' rows by candidate and baseline: an accepted candidate, its version
    and their final-tier evaluations never change, and the paired gains over the baseline
    are the costliest part of a read."""
    dev: DevCache = field(default_factory=dict)
    """Experiments' dev scores by revision."""


def read_campaign(
    store: StoreReader, campaign_id: str, cache: ReadCache | None = None
) -> CampaignView:
    """Everything the campaign pages show. Raises NotFoundError for an unknown campaign.

    ``cache`` carries what earlier reads found that cannot have changed since.
    """
    cache = ReadCache() if cache is None else cache
    campaign = store.get_as(campaign_id, Campaign)
    dag = ResearchDag.load(store, campaign_id)
    experiments = sorted(
        (e for runs in dag.experiments.values() for e in runs), key=lambda e: (e.created_at, e.id)
    )
    candidates = sorted(
        store.query_as(Candidate, campaign_id=campaign_id), key=lambda c: (c.created_at, c.id)
    )
    lineage = lineage_name(campaign, candidates)
    found = find_lineage(store, campaign.task.name, lineage)
    versions = lineage_versions(store, found) if found is not None else []
    first, start = baseline_and_start(store, campaign, lineage)
    benchmarks = task_benchmarks(campaign.task)
    higher = {b.name: b.higher_is_better for b in benchmarks}
    dev = dev_scores(experiments, campaign.created_at, cache.dev)
    means = {exp: {b: s.mean for b, s in scores.items()} for exp, scores in dev.items()}
    labels = {v.candidate_id: v.label for v in versions if v.candidate_id}
    return CampaignView(
        campaign=campaign,
        lineage=lineage,
        benchmarks=benchmarks,
        experiments=experiments,
        candidates=candidates,
        versions=versions,
        directions=direction_reports(store, dag, higher, means),
        failures=failure_groups(store, experiments),
        baseline=version_scores(first),
        start=version_scores(start),
        accepted=_accepted(store, candidates, first, cache.accepted),
        flags=flags_report(store.query_as(ProtocolFlag, campaign_id=campaign_id)),
        team=team_items(store, campaign_id),
        review=campaign_review_of(store, campaign_id),
        dev=dev,
        curves=_in_order(
            campaign_curves(campaign.created_at, experiments, dev, candidates, labels, higher),
            metric_order((b.name for b in benchmarks), benchmarks),
        ),
    )


def _in_order(curves: list[BenchmarkCurve], names: list[str]) -> list[BenchmarkCurve]:
    """``curves`` with those of ``names`` first, in that order (the rest as they came)."""
    place = {name: i for i, name in enumerate(names)}
    return sorted(curves, key=lambda c: place.get(c.benchmark, len(place)))


def _accepted(
    store: StoreReader,
    candidates: list[Candidate],
    baseline: SystemVersion | None,
    cache: dict[str, AcceptedReport],
) -> list[AcceptedReport]:
    out = []
    for c in candidates:
        if c.state != CandidateState.ACCEPTED:
            continue
        key = f"{c.id}/{baseline.id if baseline else ''}"
        if key not in cache:
            made = accepted_reports(store, [c], baseline)
            if not made:
                continue
            cache[key] = made[0]
        out.append(cache[key])
    return out


class ViewCache:
    """The last ``size`` views, each valid for the ledger sequence it was read at."""

    def __init__(self, size: int = 32) -> None:
        self._size = size
        self._views: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...], seq: int, read: Callable[[], T]) -> T:
        """The view ``key`` at ledger sequence ``seq``: cached, or made by ``read()``."""
        full = (*key, seq)
        with self._lock:
            if full in self._views:
                self._views.move_to_end(full)
                found: T = self._views[full]
                return found
        made = read()
        with self._lock:
            self._views[full] = made
            while len(self._views) > self._size:
                self._views.popitem(last=False)
        return made
