"""Recovery of a campaign whose runner stopped without finishing (killed, crashed, rebooted).

Run it once after taking the campaign's lease and before doing anything else: jobs the dead
runner left queued or running can no longer report, so they are marked ``interrupted`` (final;
the work is re-run as a new job, a new attempt); intents it left pending are listed for the
runner to carry out again under the same keys (see :mod:`rsilab.orchestrator.intents`).
"""

from __future__ import annotations

from pydantic import Field

from rsilab.orchestrator.intents import ACTOR, pending_intents
from rsilab.orchestrator.lease import Lease
from rsilab.records import (
    EventDraft,
    Intent,
    IntentState,
    Job,
    JobStatus,
    Model,
    Role,
    utc_now,
)
from rsilab.store import Store

INTERRUPTED_ERROR = "the campaign runner stopped while this job was queued or running"


class RecoveryReport(Model):
    """What :func:`recover_campaign` found and changed."""

    campaign_id: str = Field(description="The campaign recovered.")
    interrupted_job_ids: list[str] = Field(
        default_factory=list, description="Jobs marked interrupted, oldest first."
    )
    pending: list[Intent] = Field(
        default_factory=list, description="Intents to carry out again, oldest first."
    )
    done_intents: int = Field(default=0, description="Intents already done (not repeated).")

    def summary(self) -> str:
        """One line for people."""
        return (
            f"campaign {self.campaign_id}: {len(self.interrupted_job_ids)} job(s) interrupted, "
            f"{len(self.pending)} intent(s) to re-run, {self.done_intents} done"
        )


def recover_campaign(store: Store, lease: Lease, *, actor: str = ACTOR) -> RecoveryReport:
    """Mark the unfinished jobs of ``lease``'s campaign interrupted and list pending intents.

    ``lease`` proves this process runs the campaign: it is renewed first (raising
    :class:`~rsilab.orchestrator.lease.LeaseLost` if taken), so a live runner's jobs are never
    marked. All jobs change in one commit with one ``jobs_interrupted`` event (none when there
    is nothing to mark). Running it again changes nothing.
    """
    lease.heartbeat()
    campaign_id = lease.campaign_id
    jobs = [j for j in store.query_as(Job, campaign_id=campaign_id) if not j.is_finished()]
    stamp = utc_now()
    marked = [
        j.model_copy(
            update={
                "status": JobStatus.INTERRUPTED,
                "error": INTERRUPTED_ERROR,
                "finished_at": stamp,
            }
        )
        for j in jobs
    ]
    if marked:
        draft = EventDraft(
            actor=actor,
            role=str(Role.CONTROLLER),
            action="jobs_interrupted",
            campaign_id=campaign_id,
            detail=", ".join(j.id for j in marked),
        )
        store.commit(draft, marked)
    done = store.query_as(Intent, campaign_id=campaign_id, fields={"state": str(IntentState.DONE)})
    return RecoveryReport(
        campaign_id=campaign_id,
        interrupted_job_ids=[j.id for j in marked],
        pending=pending_intents(store, campaign_id),
        done_intents=len(done),
    )
