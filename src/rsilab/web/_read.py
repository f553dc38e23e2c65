"""What the pages show, read from the store once per ledger position.

Every write to a lab appends a ledger event, so a view read at ledger sequence ``n`` stays
true until the sequence moves. :class:`ViewCache` keeps the last views by (what, sequence):
a page of a finished campaign is read once, and a running campaign's page is read again only
after something happened. Nothing here writes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from rsilab.controller.lineage import find_lineage, lineage_versions
from rsilab.orchestrator.report import CampaignReport, build_report, dev_means
from rsilab.records import Campaign, Candidate, Experiment, SystemVersion
from rsilab.store import Store
from rsilab.web._curves import BenchmarkCurve, campaign_curves

T = TypeVar("T")


@dataclass
class CampaignView:
    """One campaign as every campaign page needs it."""

    campaign: Campaign
    report: CampaignReport
    experiments: list[Experiment]
    """In creation order."""
    candidates: list[Candidate]
    """In creation order."""
    versions: list[SystemVersion]
    """The lineage's versions, oldest first (empty when it has no baseline here)."""
    dev: dict[str, dict[str, float]]
    """experiment id -> benchmark -> mean dev score."""
    curves: list[BenchmarkCurve]

    @property
    def higher(self) -> dict[str, bool]:
        """Per benchmark: whether a higher score is better (known benchmarks only)."""
        return {b.name: b.higher_is_better for b in self.report.benchmarks}

    def experiment_ordinal(self) -> dict[str, int]:
        """Experiment id -> its place in the campaign, from 1."""
        return {e.id: i + 1 for i, e in enumerate(self.experiments)}


def read_campaign(store: Store, campaign_id: str) -> CampaignView:
    """Everything the campaign pages show. Raises NotFoundError for an unknown campaign."""
    report = build_report(store, campaign_id)
    campaign = store.get_as(campaign_id, Campaign)
    experiments = sorted(
        store.query_as(Experiment, campaign_id=campaign_id), key=lambda e: (e.created_at, e.id)
    )
    candidates = sorted(
        store.query_as(Candidate, campaign_id=campaign_id), key=lambda c: (c.created_at, c.id)
    )
    found = find_lineage(store, campaign.task.name, report.campaign.lineage)
    versions = lineage_versions(store, found) if found is not None else []
    labels = {v.candidate_id: v.label for v in versions if v.candidate_id}
    higher = {b.name: b.higher_is_better for b in report.benchmarks}
    return CampaignView(
        campaign=campaign,
        report=report,
        experiments=experiments,
        candidates=candidates,
        versions=versions,
        dev=dev_means(store, campaign_id),
        curves=campaign_curves(
            store, campaign_id, campaign.created_at, experiments, candidates, labels, higher
        ),
    )


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
