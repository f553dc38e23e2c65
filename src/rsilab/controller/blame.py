"""Whose failure a failed controller job is: the candidate's, or the infrastructure's.

A verdict must reflect the candidate, not an accident of the host it ran on. So a controller
job that did not succeed is classified (:func:`outside_cause`):

Counted against the candidate (the evaluation fails closed: the candidate is invalid):

- a non-zero exit code, whatever it is (a job that *exits* 137 chose to);
- any limit of the job's sandbox it broke: wall-clock, CPU, memory, processes, output, disk
  (the kernel's own limit signals, SIGXCPU and SIGXFSZ, are reported as these);
- a signal its own code brings on itself: SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGSYS (a
  system call the sandbox forbids), SIGPIPE, SIGALRM, SIGUSR1 and every other not listed below;
- a spec the sandbox refuses as invalid (more GPUs than there are, say), no model written,
  output that breaks the contract.

Infrastructure (:data:`OUTSIDE_SIGNALS` and the rest; the job is run again with the *same*
seed, so a retry cannot fish for a better draw):

- ended by a signal that stops a process from outside (an operator's ``kill``, the host's OOM
  killer, a shutdown) while no limit of ours was hit;
- cancelled, when no limit was hit (nobody but the host cancels a controller job);
- the sandbox or the executor could not start or supervise it;
- the machine running it went away (:class:`~rsilab.executors.JobInterrupted`: a cluster node
  died, or the cluster's memory monitor killed its worker): the job is recorded
  ``interrupted`` and the seed runs again on whatever machine the executor picks.

A job may send itself SIGKILL, and with a bwrap sandbox an exit status of 128 + N reads as
signal N: it is then taken for infrastructure, and with the same seed every retry does the same.
After :data:`ATTEMPTS` attempts the evaluation ends as an :class:`EvaluationFault`: an error
that decides nothing (the candidate stays pending, judged again at the next resume). Such a
candidate costs its retries and is never accepted; it is never rejected for what it may not
have done either.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence

from rsilab.controller.jobs import NOT_RUN
from rsilab.errors import UserError
from rsilab.executors.base import JobResult
from rsilab.records import Job, JobStatus
from rsilab.sandbox.base import KillReason

ATTEMPTS = 3
"""Attempts of one seed's jobs (the first and two retries) before the evaluation is an error."""

OUTSIDE_SIGNALS = frozenset(
    {signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT}
)
"""Signals that stop a process from outside: no fault of its own code raises them."""


class OutsideFault(Exception):
    """One controller job failed for a cause outside the candidate; ``cause`` says which."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


class EvaluationFault(UserError):
    """An evaluation that kept failing for causes outside the candidate: it decides nothing.

    The message names the seed (by its index, never its value) and each attempt's cause; it
    quotes no log, so an agent may read it.
    """

    def __init__(self, seed_index: int, causes: Sequence[str]) -> None:
        tried = "; ".join(f"attempt {i}: {c}" for i, c in enumerate(causes, 1))
        super().__init__(
            f"the controller's evaluation failed for a cause outside the candidate, "
            f"{len(causes)} times on seed {seed_index + 1} ({tried}); nothing was decided",
            "find what stops its jobs (the host's OOM killer, an operator's kill, a shutdown), "
            "then resume: jobs already finished are reused, the rest run with the same seeds",
        )
        self.causes = list(causes)


def machine_lost(kind: str, cause: str) -> str:
    """The phrase for a ``kind`` job whose machine went away (``cause`` as
    :class:`~rsilab.executors.JobInterrupted` gives it)."""
    if cause == "cluster_oom":
        return f"{kind} was stopped by the cluster, whose node ran short of memory"
    return f"{kind} was lost with the machine running it"


def outside_cause(job: Job, result: JobResult | None) -> str | None:
    """Why ``job`` (as recorded, with the executor's ``result``; None when it never ran)
    failed for a cause outside the candidate, in a phrase; None when it succeeded or its
    failure is the candidate's (see the module)."""
    if job.status is JobStatus.SUCCEEDED:
        return None
    if result is None:
        return job.error[: len(NOT_RUN) + 200] if job.error.startswith(NOT_RUN) else None
    if result.kill_reason is KillReason.CANCELLED:
        return f"{job.kind} was cancelled from outside before it finished"
    if result.kill_reason is not None or result.exit_code is not None:
        return None
    if result.signal is not None and result.signal in OUTSIDE_SIGNALS:
        name = signal.Signals(result.signal).name
        return f"{job.kind} was stopped by {name} from outside, with no limit of its own hit"
    return None
