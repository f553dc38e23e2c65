"""What the Host Controller keeps: jobs (with model provenance), candidates and lineages.

These records hold private numbers (scores on the accept and final tiers, the controller's
seeds). Agents never read them directly: tools return the view their setting allows.
"""

from __future__ import annotations

import hashlib
from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import Field

from rsilab.errors import ConflictError
from rsilab.records._base import Model, Record
from rsilab.records._research import Resources

# --- Jobs -------------------------------------------------------------------------------------


class JobKind(StrEnum):
    """What a job was for. ``controller-*`` jobs are the controller's own and private.

    ``fold-train`` and ``fold-eval`` are an agent's cross-validation on the train tier (its
    own data): one fold's train job on the other folds, and its predict job on the held-out
    fold. They are as public as ``train`` and ``dev-eval``.
    """

    TRAIN = "train"
    DEV_EVAL = "dev-eval"
    FOLD_TRAIN = "fold-train"
    FOLD_EVAL = "fold-eval"
    CONTROLLER_TRAIN = "controller-train"
    CONTROLLER_PREDICT = "controller-predict"

    @property
    def is_private(self) -> bool:
        return self in {JobKind.CONTROLLER_TRAIN, JobKind.CONTROLLER_PREDICT}


class JobStatus(StrEnum):
    """Lifecycle of a recorded job; the last five are final."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    KILLED = "killed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"

    def is_finished(self) -> bool:
        return self not in {JobStatus.QUEUED, JobStatus.RUNNING}


class JobInputs(Model):
    """Everything a job was made from, by hash: enough to say where its outputs came from."""

    workspace_sha256: str = Field(description="Tree hash of the harness it ran.")
    data_sha256: dict[str, str] = Field(
        default_factory=dict, description="File name in the data folder -> sha256."
    )
    model_in_sha256: str | None = Field(default=None, description="Model it started from.")
    config: str | None = Field(default=None, description="Config file passed to train.")
    seed: int = Field(description="Seed passed to the entry point.")
    argv: list[str] = Field(default_factory=list, description="The command run.")


class Job(Record):
    """One sandboxed job that the Experiment OS or the controller ran, with its provenance.

    A model file counts only if a finished, succeeded ``Job`` lists its sha256 in
    ``model_out_sha256`` (no model substitution).
    """

    KIND: ClassVar[str] = "job"
    PREFIX: ClassVar[str] = "job"

    kind: JobKind = Field(
        description="train, dev-eval, fold-train, fold-eval, controller-train, controller-predict."
    )
    status: JobStatus = Field(default=JobStatus.QUEUED, description="Lifecycle state.")
    experiment_id: str | None = Field(default=None, description="Experiment it served.")
    candidate_id: str | None = Field(default=None, description="Candidate it evaluated.")
    inputs: JobInputs = Field(description="What it was made from.")
    model_out: str | None = Field(default=None, description="Model path in the workspace.")
    model_out_sha256: str | None = Field(default=None, description="Model it produced.")
    benchmark: str | None = Field(default=None, description="Benchmark scored (eval jobs).")
    fold: str | None = Field(
        default=None, description="'i/k' for fold-train and fold-eval jobs: the fold held out."
    )
    exit_code: int | None = Field(default=None, description="Exit code; None if signalled.")
    kill_reason: str | None = Field(default=None, description="Limit that ended it, if any.")
    stdout_sha256: str | None = Field(default=None, description="Blob holding stdout.")
    stderr_sha256: str | None = Field(default=None, description="Blob holding stderr.")
    resources: Resources = Field(default_factory=Resources, description="What it used.")
    error: str = Field(default="", description="Why it failed, in words.")
    actor: str = Field(default="", description="Who started it.")
    finished_at: str | None = Field(default=None, description="When it reached a final state.")

    def is_finished(self) -> bool:
        return self.status.is_finished()

    def interrupted(self, error: str, at: str) -> Job:
        """This job as recovery leaves it when the process that ran it died: ``interrupted``
        (final), with ``error`` saying so, finished ``at``."""
        return self.model_copy(
            update={"status": JobStatus.INTERRUPTED, "error": error, "finished_at": at}
        )

    def summary(self) -> str:
        return f"{self.id} {self.kind} [{self.status}]"


# --- Candidates -------------------------------------------------------------------------------


class CandidateState(StrEnum):
    """Lifecycle of a proposal; the last four are final."""

    PENDING = "pending"
    EVALUATING = "evaluating"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    INVALID = "invalid"
    STALE = "stale"

    def is_finished(self) -> bool:
        return self not in {CandidateState.PENDING, CandidateState.EVALUATING}

    @property
    def verdict(self) -> Literal["pending", "accept", "reject"]:
        """The bare verdict agents may see."""
        if not self.is_finished():
            return "pending"
        return "accept" if self is CandidateState.ACCEPTED else "reject"


class BenchmarkDecision(Model):
    """The controller's comparison on one benchmark (private: accept-tier numbers)."""

    benchmark: str = Field(description="Benchmark name.")
    target: bool = Field(description="True for a target benchmark.")
    gain: float = Field(description="Candidate minus current, oriented so higher is better.")
    low: float = Field(description="Lower bound of the gain's interval.")
    high: float = Field(description="Upper bound of the gain's interval.")
    level: float = Field(description="Confidence level of the interval.")
    threshold: float = Field(
        description="Non-target: what the lower bound had to reach (-tolerance). Target: what "
        "the gain had to clear (the head's seed spread of its mean); its lower bound clears 0."
    )
    passed: bool = Field(description="Whether this benchmark passed its rule.")
    look: int = Field(
        default=0, description="1-based look it was decided at (0: a single-look rule)."
    )
    seeds: int = Field(default=0, description="Paired controller seeds compared (0: unpaired).")
    critical: float | None = Field(
        default=None, description="Boundary on the t scale the bound used (None: not recorded)."
    )


class Candidate(Record):
    """A proposal: a harness tree plus its recipe, judged only by the controller."""

    KIND: ClassVar[str] = "candidate"
    PREFIX: ClassVar[str] = "cand"

    task: str = Field(description="Task name.")
    lineage: str = Field(default="main", description="Lineage name.")
    parent_version_id: str = Field(description="Version the candidate was built from.")
    harness_sha256: str = Field(description="Tree hash of the proposed harness (an artifact).")
    experiment_id: str | None = Field(default=None, description="Experiment it came from.")
    data_ids: list[str] = Field(default_factory=list, description="Registered data it trains on.")
    warm_start: bool = Field(
        default=False, description="Train from the parent version's model instead of scratch."
    )
    proposer: str = Field(default="", description="Actor that proposed it.")
    proposal_index: int = Field(default=1, ge=1, description="j-th proposal of its campaign.")
    alpha: float = Field(default=0.05, description="Error rate spent on this proposal.")
    state: CandidateState = Field(default=CandidateState.PENDING, description="Lifecycle.")
    reason: str = Field(default="", description="Why it was decided so (private numbers).")
    public_note: str = Field(
        default="", description="What an agent may be told beyond the bare verdict (no numbers)."
    )
    compared_to: str | None = Field(default=None, description="Version it was judged against.")
    decisions: list[BenchmarkDecision] = Field(default_factory=list, description="Per benchmark.")
    seeds: list[int] = Field(default_factory=list, description="Controller's training seeds.")
    evaluation_ids: list[str] = Field(default_factory=list, description="Its evaluations.")
    version_id: str | None = Field(default=None, description="The version made when accepted.")
    finished_at: str | None = Field(default=None, description="When it was decided.")

    def is_finished(self) -> bool:
        return self.state.is_finished()

    def summary(self) -> str:
        return f"{self.id} {self.task}/{self.lineage} [{self.state}]"


# --- Lineages ---------------------------------------------------------------------------------


def lineage_id(task: str, name: str) -> str:
    """The id of the lineage keyed by (task, name): the same key always gives the same id, so
    two processes creating it at once conflict instead of forking it."""
    digest = hashlib.sha256(f"{task}\x00{name}".encode()).hexdigest()[:12]
    return f"{Lineage.PREFIX}-{digest}"


class Lineage(Record):
    """The head of a version lineage. Acceptance is a compare-and-swap on its ``rev``."""

    KIND: ClassVar[str] = "lineage"
    PREFIX: ClassVar[str] = "lin"

    task: str = Field(description="Task name.")
    name: str = Field(default="main", description="Lineage name.")
    head_id: str = Field(description="Current version.")
    versions: list[str] = Field(default_factory=list, description="Every version, oldest first.")
    private_data_sha256: str = Field(
        default="", description="Hash of the private tiers at baseline; checked each time."
    )
    evaluator_sha256: str = Field(
        default="", description="Hash of the scorers and driver at baseline; checked likewise."
    )

    def model_post_init(self, __context: Any) -> None:
        if not self.id:
            self.id = lineage_id(self.task, self.name)
        super().model_post_init(__context)

    def check_update(self, previous: Record) -> None:
        super().check_update(previous)
        assert isinstance(previous, Lineage)
        if self.versions[: len(previous.versions)] != previous.versions:
            raise ConflictError(f"lineage {self.id}: history is append-only")
        if self.head_id not in self.versions:
            raise ConflictError(f"lineage {self.id}: the head must be one of its versions")

    def summary(self) -> str:
        return f"{self.id} {self.task}/{self.name} head {self.head_id}"
