"""How far a campaign's baseline has got, read from the job records the controller writes.

Before a campaign's first experiment the Host Controller evaluates the baseline (when its
lineage has none): one ``controller-train`` job per seed, all started together, each
recorded when it starts and again when it ends, with no campaign, candidate or experiment
(the baseline belongs to the lineage). Counting those recorded since the campaign was created
gives "seed k of n" without any new record. The terminal's live view and the dashboard both
read it from here.
"""

from __future__ import annotations

from dataclasses import dataclass

from rsilab.controller.lineage import find_lineage
from rsilab.records import Campaign, Job, JobKind
from rsilab.store import StoreReader


@dataclass(frozen=True)
class BaselineProgress:
    """The baseline being evaluated: seeds whose training job finished, of those started."""

    done: int
    seeds: int
    """Baseline training jobs recorded so far (0 while the first is being set up)."""

    @property
    def current(self) -> int:
        """The seed being evaluated now, from 1 (``seeds`` once every one has finished)."""
        return min(self.done + 1, self.seeds)

    def text(self) -> str:
        """'seed k of n (d finished)', or 'starting' before any seed's job is recorded."""
        if self.seeds == 0:
            return "starting"
        return f"seed {self.current} of {self.seeds} ({self.done} finished)"


def baseline_progress(
    store: StoreReader, campaign: Campaign, lineage: str = "main"
) -> BaselineProgress | None:
    """The progress of the baseline ``campaign`` is waiting for; None when it waits for none
    (it has ended, or ``lineage`` of its task already has a baseline)."""
    if campaign.is_finished() or find_lineage(store, campaign.task.name, lineage) is not None:
        return None
    jobs = [
        j
        for j in store.query_as(Job, fields={"kind": str(JobKind.CONTROLLER_TRAIN)})
        if j.campaign_id is None
        and j.candidate_id is None
        and j.experiment_id is None
        and j.created_at >= campaign.created_at
    ]
    return BaselineProgress(sum(1 for j in jobs if j.is_finished()), len(jobs))
