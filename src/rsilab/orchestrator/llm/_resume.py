"""What an LLM campaign continues after a stop: the open experiments of interrupted steps.

A Worker step cut short (the LLM endpoint went away, the runner was killed) leaves its
experiment open, its finished jobs recorded. Recovery keeps such experiments open
(:func:`kept_for_resume`) instead of closing them as cancelled, so the resumed step continues
the same record: it is not counted twice against the experiment budget, and the jobs that
finished (a train job's model) are not run again. The step's prompt names them
(:func:`unfinished_note`), since a resumed step starts from a fresh conversation.
"""

from __future__ import annotations

from collections.abc import Callable

from rsilab.orchestrator.llm._state import STEP_PREFIX
from rsilab.records import Experiment, Intent, IntentState, Job, JobStatus
from rsilab.store import Store


def kept_for_resume(store: Store, campaign_id: str) -> Callable[[Experiment], bool]:
    """Recovery's ``keep_open``: an open experiment stays open when its creator has a step
    still pending (begun, not done), which the resume runs again."""
    actors = _pending_actors(store, campaign_id)
    return lambda experiment: experiment.created_by in actors


def continuing(store: Store, campaign_id: str) -> bool:
    """Whether a pending step has open experiments to finish: the resume runs it even when
    the experiment budget is spent (its experiments are counted already)."""
    actors = _pending_actors(store, campaign_id)
    return any(
        e.created_by in actors and not e.is_finished()
        for e in store.query_as(Experiment, campaign_id=campaign_id)
    )


def _pending_actors(store: Store, campaign_id: str) -> set[str]:
    """The actors whose step was begun and is not done."""
    pending = store.query_as(
        Intent, campaign_id=campaign_id, fields={"state": str(IntentState.PENDING)}
    )
    return {i.key.split(":", 2)[2] for i in pending if i.key.startswith(STEP_PREFIX)}


def open_experiments(store: Store, campaign_id: str, actor: str) -> list[Experiment]:
    """``actor``'s experiments of the campaign that are not finished, oldest first."""
    return [
        e
        for e in store.query_as(Experiment, campaign_id=campaign_id)
        if e.created_by == actor and not e.is_finished()
    ]


def unfinished_note(store: Store, campaign_id: str, experiments: list[Experiment]) -> str:
    """A prompt paragraph naming ``experiments`` and their jobs ("" when there are none)."""
    if not experiments:
        return ""
    jobs = store.query_as(Job, campaign_id=campaign_id)
    lines = [
        "Unfinished experiments of yours (they already count against the experiment budget: "
        "continue them instead of creating new ones; a job that succeeded need not run again, "
        "run what did not finish, then finish_experiment):"
    ]
    for exp in experiments:
        done = [_job_line(j) for j in jobs if j.experiment_id == exp.id]
        shown = "; ".join(done) if done else "no jobs yet"
        lines.append(f"- {exp.id} ({exp.description[:120]!r}): {shown}")
    return "\n".join(lines)


def _job_line(job: Job) -> str:
    model = (
        f", model {job.model_out}" if job.status is JobStatus.SUCCEEDED and job.model_out else ""
    )
    return f"{job.kind} {job.id} {job.status}{model}"
