"""Recovery of controller work a dead process left: jobs, candidates, temporary folders.

A process killed while the controller worked for it leaves its controller jobs ``running``, a
candidate ``evaluating`` (or ``pending``, its judge never started) and its throwaway folders.
:func:`recover_controller_work` repairs that, and touches only work whose owner is certainly
dead: a judge holds its candidate's claim and a baseline the lab's baseline claim
(:mod:`rsilab.controller._claims`) for as long as it works, and the kernel drops them when it
dies, so recovery acts only on work whose claim it can take, and holds the claim meanwhile.

What it does to a candidate whose judge is dead:

- its controller jobs still queued or running are marked ``interrupted`` (final);
- a candidate left ``evaluating`` is judged again: the controller's seeds derive from the
  lab's secret and the candidate's id, so the new attempt uses the same seeds, and the
  controller jobs the dead judge finished are reused, not run again (their models and outputs
  are stored; see :func:`rsilab.controller.jobs.recorded_success`). It is set back to
  ``pending`` with :data:`INTERRUPTED_REASON` and judged;
- a candidate whose second attempt was interrupted too is rejected with
  :data:`INTERRUPTED_TWICE`: recovery re-runs work killed by rsilab's own death once, not
  forever;
- a ``pending`` candidate (its judge never started) is judged.

Judging needs the candidate's controller; without one, or for a candidate of another task or
lineage, the candidate is left ``pending`` and listed, for a caller that judges it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Concatenate, ParamSpec, Protocol, TypeVar

from pydantic import Field

from rsilab.controller._claims import baseline_claim, candidate_claim
from rsilab.controller.jobs import CONTROLLER_ACTOR
from rsilab.records import (
    Candidate,
    CandidateState,
    EventDraft,
    Job,
    Model,
    Record,
    Role,
    utc_now,
)
from rsilab.sandbox.owners import pid_alive, sweep_dead_tmpdirs
from rsilab.store.base import Store
from rsilab.store.lab import Lab

if TYPE_CHECKING:
    from rsilab.controller.host import HostController

log = logging.getLogger(__name__)

INTERRUPTED_JOB_ERROR = "the process that ran this controller job stopped before it finished"
INTERRUPTED_REASON = (
    "interrupted: the process judging it stopped; judged again from the start with the same seeds"
)
"""The reason a candidate set back to pending carries until its new judgement ends."""
INTERRUPTED_TWICE = (
    "the controller's evaluation was interrupted twice (the process judging it stopped); "
    "propose it again"
)


class ControllerRecovery(Model):
    """What :func:`recover_controller_work` found and changed."""

    campaign_id: str | None = Field(
        description="The campaign whose controller work was recovered; None: the lab's own "
        "(baselines, candidates of no campaign)."
    )
    interrupted_job_ids: list[str] = Field(
        default_factory=list, description="Controller jobs marked interrupted."
    )
    rejudged: dict[str, str] = Field(
        default_factory=dict,
        description="Candidates judged again (or for the first time) -> the state they ended in.",
    )
    rejected_ids: list[str] = Field(
        default_factory=list, description="Candidates rejected: interrupted a second time."
    )
    pending_ids: list[str] = Field(
        default_factory=list,
        description="Candidates left pending for a caller to judge (no controller for them).",
    )
    live_ids: list[str] = Field(
        default_factory=list, description="Candidates left alone: a live process judges them."
    )
    baseline_live: bool = Field(
        default=False, description="Baseline jobs left alone: a live process runs a baseline."
    )
    removed_folders: list[str] = Field(
        default_factory=list, description="Temporary folders of dead processes removed."
    )

    def summary(self) -> str:
        """One line for people."""
        scope = f"campaign {self.campaign_id}" if self.campaign_id else "lab"
        return (
            f"{scope}: {len(self.interrupted_job_ids)} controller job(s) interrupted, "
            f"{len(self.rejudged)} candidate(s) judged, {len(self.rejected_ids)} rejected, "
            f"{len(self.pending_ids)} left pending, {len(self.live_ids)} judged elsewhere, "
            f"{len(self.removed_folders)} temporary folder(s) removed"
        )


def recover_controller_work(
    lab: Lab,
    campaign_id: str | None,
    *,
    controller: HostController | None = None,
) -> ControllerRecovery:
    """Repair the controller work dead processes left in ``campaign_id`` (None: the lab's
    own work: baseline jobs and candidates of no campaign); see the module.

    Candidates of ``controller``'s task and lineage are judged here, synchronously, one after
    another (a re-run costs what the first judgement did); others are left pending. Work a
    live process holds is never touched, so it is safe to call at any time, from any process;
    calling it again changes nothing that is already repaired. Temporary folders of dead
    processes are removed first.

    Raises:
        LabError: the lab could not be read or written.
    """
    report = ControllerRecovery(campaign_id=campaign_id)
    report.removed_folders = [str(p) for p in sweep_dead_tmpdirs()]
    report.removed_folders += [
        str(p) for p in lab.artifacts.remove_stale_ingests(lambda pid: not pid_alive(pid))
    ]
    store = lab.store
    if campaign_id is None:
        report.baseline_live = not interrupt_dead_baseline_jobs(lab, report)
    for candidate_id in _candidates_in_flight(store, campaign_id):
        with candidate_claim(lab.path, candidate_id, wait=False) as held:
            if not held:
                report.live_ids.append(candidate_id)
                continue
            _recover_candidate(lab, candidate_id, controller, report)
    return report


def interrupt_dead_baseline_jobs(lab: Lab, report: ControllerRecovery | None = None) -> bool:
    """Mark the unfinished jobs of baselines interrupted when no baseline runs in a live
    process (their owners are then dead); False, changing nothing, when one runs."""
    with baseline_claim(lab.path, exclusive=True) as held:
        if not held:
            return False
        jobs = [
            j
            for j in lab.store.query_as(Job)
            if j.actor == CONTROLLER_ACTOR
            and j.campaign_id is None
            and j.candidate_id is None
            and not j.is_finished()
        ]
        marked = _interrupt(lab.store, None, jobs)
        if report is not None:
            report.interrupted_job_ids += marked
    return True


def _candidates_in_flight(store: Store, campaign_id: str | None) -> list[str]:
    """Ids of the scope's candidates not yet decided, and of candidates whose controller jobs
    are unfinished, oldest first."""
    found = [
        c.id
        for c in store.query_as(Candidate, campaign_id=campaign_id)
        if c.campaign_id == campaign_id and not c.is_finished()
    ]
    for job in store.query_as(Job, campaign_id=campaign_id):
        if (
            job.campaign_id == campaign_id
            and job.actor == CONTROLLER_ACTOR
            and job.candidate_id is not None
            and not job.is_finished()
            and job.candidate_id not in found
        ):
            found.append(job.candidate_id)
    return found


def _recover_candidate(
    lab: Lab,
    candidate_id: str,
    controller: HostController | None,
    report: ControllerRecovery,
) -> None:
    """Repair one candidate whose claim the caller holds (its judge is dead)."""
    store = lab.store
    candidate = store.get_as(candidate_id, Candidate)
    jobs = [
        j
        for j in store.query_as(Job, fields={"candidate_id": candidate_id})
        if j.actor == CONTROLLER_ACTOR and not j.is_finished()
    ]
    report.interrupted_job_ids += _interrupt(store, candidate.campaign_id, jobs)
    if candidate.is_finished():
        return
    if candidate.state is CandidateState.EVALUATING:
        if candidate.reason.startswith(INTERRUPTED_REASON):
            _commit(store, "candidate_rejected", candidate.campaign_id, [_rejected(candidate)])
            report.rejected_ids.append(candidate.id)
            return
        candidate = candidate.model_copy(
            update={
                "state": CandidateState.PENDING,
                "reason": INTERRUPTED_REASON,
                "seeds": [],
                "evaluation_ids": [],
            }
        )
        _commit(store, "candidate_interrupted", candidate.campaign_id, [candidate])
    if controller is None or (controller.task.name, controller.lineage) != (
        candidate.task,
        candidate.lineage,
    ):
        report.pending_ids.append(candidate.id)
        return
    judged = controller.judge_safely(candidate.id)
    report.rejudged[candidate.id] = str(judged.state) if judged is not None else "unknown"


def _rejected(candidate: Candidate) -> Candidate:
    return candidate.model_copy(
        update={
            "state": CandidateState.REJECTED,
            "reason": INTERRUPTED_TWICE,
            "public_note": INTERRUPTED_TWICE,
            "finished_at": utc_now(),
        }
    )


def _interrupt(store: Store, campaign_id: str | None, jobs: Sequence[Job]) -> list[str]:
    """Mark ``jobs`` interrupted in one commit (one ``jobs_interrupted`` event); their ids."""
    if not jobs:
        return []
    stamp = utc_now()
    marked = [j.interrupted(INTERRUPTED_JOB_ERROR, stamp) for j in jobs]
    _commit(store, "jobs_interrupted", campaign_id, marked)
    return [j.id for j in marked]


def _commit(store: Store, action: str, campaign_id: str | None, writes: Sequence[Record]) -> None:
    draft = EventDraft(
        actor=CONTROLLER_ACTOR,
        role=str(Role.CONTROLLER),
        action=action,
        campaign_id=campaign_id,
        detail=", ".join(r.id for r in writes)[:500],
    )
    store.commit(draft, list(writes))


# --- the hooks the controller's own work runs under ---------------------------------------


class _OnLab(Protocol):
    lab: Lab


S = TypeVar("S", bound=_OnLab)
P = ParamSpec("P")
R = TypeVar("R")


def holds_candidate_claim(
    method: Callable[Concatenate[S, str, P], R],
) -> Callable[Concatenate[S, str, P], R]:
    """Run ``method(self, candidate_id, ...)`` holding the candidate's claim (waiting for a
    live holder), so recovery never takes a candidate whose judge is alive."""

    @functools.wraps(method)
    def claimed(self: S, candidate_id: str, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with candidate_claim(self.lab.path, candidate_id):
            return method(self, candidate_id, *args, **kwargs)

    return claimed


def holds_baseline_claim(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Run ``method(self, ...)`` holding the lab's baseline claim (shared), after marking the
    jobs of dead baselines interrupted (a baseline killed before is run again from the start,
    with the same seeds)."""

    @functools.wraps(method)
    def claimed(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        interrupt_dead_baseline_jobs(self.lab)
        with baseline_claim(self.lab.path):
            return method(self, *args, **kwargs)

    return claimed
