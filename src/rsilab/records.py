"""The nouns of rsilab as pydantic models: what the store keeps and the ledger describes.

Every stored record derives from :class:`Record`. Records are JSON only (never pickle); the
store writes them as canonical JSON text and the ledger carries the sha256 of that text, so an
edited record is caught by ``rsilab verify``. ``SCHEMA_VERSION`` names the shape of these
models; the store refuses or migrates labs written with another version.

Contracts a store enforces through :meth:`Record.check_update`:
- a finished experiment (or any record whose state ``is_finished()``) cannot be changed;
- artifact provenance notes can be appended, never rewritten;
- ``id``, ``kind``, ``campaign_id`` and ``created_at`` never change.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from rsilab.errors import ConflictError

SCHEMA_VERSION = 2
"""Version of the record shapes and of the database layout; bumped with a migration."""


def utc_now() -> str:
    """The current time as an ISO-8601 UTC string with microseconds (what records store)."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def new_id(prefix: str) -> str:
    """A fresh record id: the kind's prefix and 12 random hex digits, e.g. ``exp-3fa9c2d1b07e``."""
    return f"{prefix}-{secrets.token_hex(6)}"


class Model(BaseModel):
    """Base of all models: unknown fields are refused so typos never pass silently."""

    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class Role(StrEnum):
    """Who is calling. Agents: main, worker, reviewer, leader. Principals: controller, human."""

    MAIN = "main"
    WORKER = "worker"
    REVIEWER = "reviewer"
    LEADER = "leader"
    CONTROLLER = "controller"
    HUMAN = "human"

    @property
    def is_agent(self) -> bool:
        """Agents are untrusted and confined to their campaign; principals are not."""
        return self in {Role.MAIN, Role.WORKER, Role.REVIEWER, Role.LEADER}


class Record(Model):
    """Base of every stored record.

    Subclasses set ``KIND`` (the table key and id prefix source) and may override
    :meth:`check_update`.
    """

    KIND: ClassVar[str] = "record"
    PREFIX: ClassVar[str] = "rec"

    id: str = Field(default="", description="Unique id, assigned on creation: '<prefix>-<hex>'.")
    campaign_id: str | None = Field(
        default=None, description="Campaign the record belongs to; None for lab-wide records."
    )
    created_at: str = Field(default_factory=utc_now, description="Creation time, ISO-8601 UTC.")
    rev: int = Field(
        default=0,
        description="Revision: 0 before the first write; the store bumps it on every write.",
    )

    def model_post_init(self, __context: Any) -> None:
        if not self.id:
            self.id = new_id(self.PREFIX)

    def is_finished(self) -> bool:
        """True when the record may no longer change (records without a state never finish)."""
        return False

    def check_update(self, previous: Record) -> None:
        """Raise :class:`ConflictError` if replacing ``previous`` by ``self`` breaks a contract."""
        for name in ("id", "campaign_id", "created_at"):
            if getattr(previous, name) != getattr(self, name):
                raise ConflictError(f"{self.KIND} {self.id}: field {name!r} cannot change")
        if previous.is_finished():
            raise ConflictError(
                f"{self.KIND} {self.id} is finished and cannot be changed; "
                "create a new record instead"
            )

    def summary(self) -> str:
        """One line that names the record for listings."""
        return self.id


# --- Task and campaign -------------------------------------------------------------------------


class TaskRef(Model):
    """A reference to a task: enough to find and check it again later."""

    name: str = Field(description="Task name, e.g. 'digits'.")
    source: str = Field(default="", description="Where the task came from: 'builtin', a path.")
    digest: str | None = Field(default=None, description="sha256 of the task spec, when known.")


class CampaignState(StrEnum):
    """Lifecycle of a campaign."""

    RUNNING = "running"
    STOPPED = "stopped"
    FINISHED = "finished"
    FAILED = "failed"

    def is_finished(self) -> bool:
        return self in {CampaignState.FINISHED, CampaignState.FAILED}


class Campaign(Record):
    """One run of the orchestrator on a task."""

    KIND: ClassVar[str] = "campaign"
    PREFIX: ClassVar[str] = "cmp"

    task: TaskRef = Field(description="The task this campaign improves.")
    state: CampaignState = Field(default=CampaignState.RUNNING, description="Lifecycle state.")
    settings: dict[str, Any] = Field(default_factory=dict, description="Budget, setting, seed.")
    notes: str = Field(default="", description="Free text from the person who started it.")

    def model_post_init(self, __context: Any) -> None:
        super().model_post_init(__context)
        if self.campaign_id is None:  # a campaign belongs to itself, so agents see only theirs
            self.campaign_id = self.id

    def is_finished(self) -> bool:
        return self.state.is_finished()

    def summary(self) -> str:
        return f"{self.id} {self.task.name} [{self.state}]"


# --- Research DAG -----------------------------------------------------------------------------


class EdgeRelation(StrEnum):
    """How a direction relates to the one it grew from."""

    CONTINUE = "continue"
    VERIFY = "verify"
    BRANCH = "branch"
    REVISE = "revise"


class DirectionEdge(Model):
    """An edge of the research DAG, stored on the child direction."""

    parent_id: str = Field(description="Id of the parent direction.")
    relation: EdgeRelation = Field(description="continue, verify, branch or revise.")


class DirectionState(StrEnum):
    """Lifecycle of a direction."""

    OPEN = "open"
    CONCLUDED = "concluded"
    ABANDONED = "abandoned"

    def is_finished(self) -> bool:
        return self is not DirectionState.OPEN


class Direction(Record):
    """A node of the research DAG: a hypothesis and a plan to test it."""

    KIND: ClassVar[str] = "direction"
    PREFIX: ClassVar[str] = "dir"

    title: str = Field(description="Short name of the direction.")
    hypothesis: str = Field(description="What is believed and would be tested.")
    plan: str = Field(default="", description="How the workers should test it.")
    parents: list[DirectionEdge] = Field(default_factory=list, description="Incoming DAG edges.")
    state: DirectionState = Field(default=DirectionState.OPEN, description="Lifecycle state.")
    created_by: str = Field(default="", description="Actor that created it.")
    conclusion: str = Field(default="", description="Why it was concluded or abandoned.")

    def is_finished(self) -> bool:
        return self.state.is_finished()

    def summary(self) -> str:
        return f"{self.id} {self.title!r} [{self.state}]"


# --- Experiments ------------------------------------------------------------------------------


class ExperimentState(StrEnum):
    """Lifecycle of an experiment; the last three are final."""

    CREATED = "created"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    def is_finished(self) -> bool:
        return self in {
            ExperimentState.SUCCEEDED,
            ExperimentState.FAILED,
            ExperimentState.CANCELLED,
        }


class MetricSource(StrEnum):
    """Who produced a number. Only controller numbers count."""

    AGENT_REPORTED = "agent-reported"
    CONTROLLER = "controller"


class Metric(Model):
    """One logged number."""

    name: str = Field(description="Metric name, e.g. 'accuracy'.")
    value: float = Field(description="The value (finite).")
    split: Literal["train", "dev"] = Field(default="dev", description="Split it was measured on.")
    step: int | None = Field(default=None, description="Training step or epoch, if any.")
    source: MetricSource = Field(
        default=MetricSource.AGENT_REPORTED, description="Who produced it."
    )
    at: str = Field(default_factory=utc_now, description="When it was logged.")


class Resources(Model):
    """Resources used; summed over jobs where it applies."""

    cpu_s: float = Field(default=0.0, description="CPU seconds.")
    wall_s: float = Field(default=0.0, description="Wall-clock seconds.")
    peak_rss_mb: float = Field(default=0.0, description="Peak resident memory, MiB.")
    tokens_in: int = Field(default=0, description="LLM prompt tokens.")
    tokens_out: int = Field(default=0, description="LLM completion tokens.")
    cost_usd: float = Field(default=0.0, description="Money spent, where a price is known.")


class Experiment(Record):
    """One execution under a direction: what was run, on what, and what came of it."""

    KIND: ClassVar[str] = "experiment"
    PREFIX: ClassVar[str] = "exp"

    direction_id: str = Field(description="Direction the experiment serves.")
    description: str = Field(default="", description="What this experiment changes or tests.")
    config: dict[str, Any] = Field(default_factory=dict, description="Configuration used.")
    parent_experiment_id: str | None = Field(
        default=None, description="Experiment this one builds on."
    )
    data_ids: list[str] = Field(default_factory=list, description="Datasets it used.")
    workspace_hash: str | None = Field(default=None, description="Tree hash of the workspace.")
    state: ExperimentState = Field(default=ExperimentState.CREATED, description="Lifecycle.")
    metrics: list[Metric] = Field(default_factory=list, description="Logged numbers.")
    log_artifacts: list[str] = Field(default_factory=list, description="sha256 of job logs.")
    resources: Resources = Field(default_factory=Resources, description="Resources used.")
    summary_text: str = Field(default="", description="What the worker concluded.")
    created_by: str = Field(default="", description="Actor that created it.")
    finished_at: str | None = Field(default=None, description="When it reached a final state.")

    def is_finished(self) -> bool:
        return self.state.is_finished()

    def summary(self) -> str:
        return f"{self.id} {self.description[:50]!r} [{self.state}]"


# --- Data and artifacts -----------------------------------------------------------------------


class ProvenanceNote(Model):
    """One append-only note on where an artifact came from or how it was used."""

    at: str = Field(default_factory=utc_now, description="When the note was added.")
    actor: str = Field(description="Who added it.")
    text: str = Field(description="The note.")


class Artifact(Record):
    """A content-addressed file or tree in the lab's blob folder."""

    KIND: ClassVar[str] = "artifact"
    PREFIX: ClassVar[str] = "art"

    sha256: str = Field(description="Content hash (for a tree: hash of its manifest).")
    artifact_kind: Literal["file", "tree"] = Field(description="A single file or a tree.")
    size: int = Field(description="Bytes (for a tree: sum of its files).")
    name: str = Field(default="", description="Original file or folder name.")
    notes: list[ProvenanceNote] = Field(default_factory=list, description="Append-only notes.")

    def check_update(self, previous: Record) -> None:
        super().check_update(previous)
        assert isinstance(previous, Artifact)
        if (self.sha256, self.artifact_kind, self.size) != (
            previous.sha256,
            previous.artifact_kind,
            previous.size,
        ):
            raise ConflictError(f"artifact {self.id}: content fields cannot change")
        if self.notes[: len(previous.notes)] != previous.notes:
            raise ConflictError(f"artifact {self.id}: provenance notes can only be appended")

    def summary(self) -> str:
        return f"{self.id} {self.artifact_kind} {self.name!r} {self.size} B"


class DataTier(StrEnum):
    """Benchmark tiers. Agents may use train, see dev; the private tiers are controller-only."""

    TRAIN = "train"
    DEV = "dev"
    ACCEPT = "accept"
    FINAL = "final"

    @property
    def is_private(self) -> bool:
        return self in {DataTier.ACCEPT, DataTier.FINAL}


class Dataset(Record):
    """An entry of the lab's data pool: a named artifact with a readme."""

    KIND: ClassVar[str] = "dataset"
    PREFIX: ClassVar[str] = "data"

    name: str = Field(description="Name agents use to refer to it.")
    artifact_sha256: str = Field(description="Hash of the stored file or tree.")
    artifact_kind: Literal["file", "tree"] = Field(description="File or tree.")
    tier: DataTier = Field(default=DataTier.TRAIN, description="Which tier it belongs to.")
    readme: str = Field(default="", description="What the data is and how it was made.")
    source: str = Field(default="", description="Where it came from.")
    added_by: str = Field(default="", description="Actor that added it.")

    def summary(self) -> str:
        return f"{self.id} {self.name!r} [{self.tier}] {self.artifact_sha256[:12]}"


# --- Evaluation -------------------------------------------------------------------------------


class SampleScore(Model):
    """One score of one sample in one epoch (seed)."""

    sample_id: str = Field(description="Sample identifier within the split.")
    epoch: int = Field(default=0, description="Epoch index (repeat of the evaluation).")
    seed: int | None = Field(default=None, description="Seed used, if any.")
    score: float = Field(description="The score.")


class Interval(Model):
    """A point estimate with a confidence interval."""

    value: float = Field(description="Point estimate.")
    low: float = Field(description="Lower bound.")
    high: float = Field(description="Upper bound.")
    level: float = Field(default=0.95, description="Confidence level.")


class Evaluation(Record):
    """Scores of one system on one benchmark split, per sample and epoch."""

    KIND: ClassVar[str] = "evaluation"
    PREFIX: ClassVar[str] = "eval"

    benchmark: str = Field(description="Benchmark name.")
    tier: DataTier = Field(description="Which tier was scored.")
    subject_id: str = Field(description="Version or experiment that was evaluated.")
    metric: str = Field(description="Metric name.")
    samples: list[SampleScore] = Field(default_factory=list, description="Per-sample scores.")
    aggregates: dict[str, Interval] = Field(
        default_factory=dict, description="avg@k, pass@k and the like, with intervals."
    )
    evaluator: str = Field(default="", description="Who produced it (controller id).")

    def summary(self) -> str:
        return f"{self.id} {self.benchmark}/{self.tier} of {self.subject_id}"


# --- Reviews and memory -----------------------------------------------------------------------


class Verdict(StrEnum):
    """A reviewer's reading of the evidence."""

    SUPPORTS = "supports"
    REFUTES = "refutes"
    INCONCLUSIVE = "inconclusive"


class Recommendation(StrEnum):
    """What the reviewer advises the Main agent to do next."""

    CONTINUE = "continue"
    VERIFY = "verify"
    BRANCH = "branch"
    REVISE = "revise"
    STOP = "stop"


class Comparison(Model):
    """An effect computed from the records: mean of ``a`` minus mean of ``b``."""

    metric: str = Field(description="Metric compared.")
    a_ids: list[str] = Field(description="Experiments of the first group.")
    b_ids: list[str] = Field(description="Experiments of the second group.")
    a_mean: float = Field(description="Mean of the first group.")
    b_mean: float = Field(description="Mean of the second group.")
    effect: Interval = Field(description="Difference a - b with its interval.")
    n_a: int = Field(description="Values in the first group.")
    n_b: int = Field(description="Values in the second group.")


class Review(Record):
    """A reviewer's comparison of related experiments and advice on what to do next."""

    KIND: ClassVar[str] = "review"
    PREFIX: ClassVar[str] = "rev"

    direction_id: str | None = Field(default=None, description="Direction under review.")
    experiment_ids: list[str] = Field(description="Experiments the review read.")
    comparisons: list[Comparison] = Field(default_factory=list, description="Computed effects.")
    verdict: Verdict = Field(description="supports, refutes or inconclusive.")
    recommendation: Recommendation = Field(description="continue, verify, branch, revise, stop.")
    rationale: str = Field(default="", description="Why, in words.")
    reviewer: str = Field(default="", description="Actor that wrote it.")

    def summary(self) -> str:
        return f"{self.id} {self.verdict} -> {self.recommendation}"


class FindingStatus(StrEnum):
    """Shared-memory status: an unresolved problem is never shown as a result."""

    SUPPORTED = "supported"
    UNRESOLVED = "unresolved"
    REFUTED = "refuted"


class Finding(Record):
    """A shared-memory entry with its conditions, uncertainty and sources."""

    KIND: ClassVar[str] = "finding"
    PREFIX: ClassVar[str] = "fnd"

    claim: str = Field(description="What was found.")
    status: FindingStatus = Field(description="supported, unresolved or refuted.")
    conditions: str = Field(default="", description="Conditions under which it held.")
    uncertainty: str = Field(default="", description="How sure, and why.")
    sources: list[str] = Field(default_factory=list, description="Source record ids.")
    author: str = Field(default="", description="Actor that published it.")

    def summary(self) -> str:
        return f"{self.id} [{self.status}] {self.claim[:60]!r}"


class Skill(Record):
    """A reusable procedure; each revision is a new record pointing at its parent."""

    KIND: ClassVar[str] = "skill"
    PREFIX: ClassVar[str] = "skl"

    name: str = Field(description="Skill name.")
    version: int = Field(default=1, description="Revision number within the name.")
    text: str = Field(description="The procedure, in words.")
    code: str | None = Field(default=None, description="Optional code that carries it out.")
    parent_id: str | None = Field(default=None, description="Previous revision.")

    def summary(self) -> str:
        return f"{self.id} {self.name} v{self.version}"


class Orientation(Record):
    """A researcher's role text; each revision is a new record pointing at its parent."""

    KIND: ClassVar[str] = "orientation"
    PREFIX: ClassVar[str] = "ori"

    name: str = Field(description="Orientation name, e.g. 'explorer'.")
    version: int = Field(default=1, description="Revision number within the name.")
    text: str = Field(description="The role text.")
    parent_id: str | None = Field(default=None, description="Previous revision.")

    def summary(self) -> str:
        return f"{self.id} {self.name} v{self.version}"


class SystemVersion(Record):
    """An accepted (or proposed) system in a lineage: harness H_i plus model M_j."""

    KIND: ClassVar[str] = "version"
    PREFIX: ClassVar[str] = "ver"

    lineage: str = Field(default="main", description="Lineage name.")
    label: str = Field(description="Human label, e.g. 'H1/M0'.")
    harness_sha256: str = Field(description="Tree hash of the harness.")
    model_sha256: str | None = Field(default=None, description="Hash of the model artifact.")
    parent_id: str | None = Field(default=None, description="Version it was derived from.")
    scores: dict[str, Interval] = Field(
        default_factory=dict, description="Final-tier score per benchmark."
    )
    decision: str = Field(default="", description="Why it was accepted or rejected.")

    def summary(self) -> str:
        return f"{self.id} {self.lineage}:{self.label}"


class FlagStage(StrEnum):
    """Where a protocol-sensitive action happened. ``access`` covers tool-layer refusals."""

    TRAINING = "training"
    INFERENCE = "inference"
    EVALUATION = "evaluation"
    REPORTING = "reporting"
    ACCESS = "access"


class ProtocolFlag(Record):
    """A detected protocol-sensitive action: a refusal or a detection, never silent."""

    KIND: ClassVar[str] = "flag"
    PREFIX: ClassVar[str] = "flg"

    stage: FlagStage = Field(description="Stage of the protocol.")
    rule: str = Field(description="Rule that fired, e.g. 'path_outside_workspace'.")
    detail: str = Field(description="What happened.")
    actor: str = Field(default="", description="Who did it.")
    role: str = Field(default="", description="In which role.")
    tool: str | None = Field(default=None, description="Tool involved, if any.")
    blocked: bool = Field(default=True, description="True if refused; False if only detected.")

    def summary(self) -> str:
        return f"{self.id} [{self.stage}] {self.rule}"


# --- Ledger -----------------------------------------------------------------------------------


class RecordRef(Model):
    """A record written in the same transaction as an event, with the digest of its text."""

    kind: str = Field(description="Record kind.")
    id: str = Field(description="Record id.")
    rev: int = Field(description="Revision written.")
    digest: str = Field(description="sha256 of the record's canonical JSON text.")


class Outcome(StrEnum):
    """How a call or change ended."""

    OK = "ok"
    ERROR = "error"
    DENIED = "denied"


class EventDraft(Model):
    """What a caller says about a change; the ledger adds sequence, time and hashes."""

    actor: str = Field(description="Who acted (agent name, 'cli', 'controller').")
    role: str = Field(description="Role the actor held.")
    action: str = Field(description="'tool_call', 'campaign_created', 'lab_created', ...")
    campaign_id: str | None = Field(default=None, description="Campaign concerned.")
    tool: str | None = Field(default=None, description="Tool called, for tool calls.")
    args_digest: str | None = Field(default=None, description="sha256 of the canonical args.")
    outcome: Outcome = Field(default=Outcome.OK, description="ok, error or denied.")
    error: dict[str, Any] | None = Field(default=None, description="ToolError payload if any.")
    detail: str = Field(default="", description="Short human-readable note.")
    cost: Resources | None = Field(default=None, description="Resources the action used.")


class Event(EventDraft):
    """One line of the append-only, hash-chained ledger."""

    seq: int = Field(description="Gap-free sequence number, from 1.")
    at: str = Field(description="When it was appended, ISO-8601 UTC.")
    records: list[RecordRef] = Field(default_factory=list, description="Records written with it.")
    prev_hash: str = Field(description="Hash of the previous event ('0'*64 for the first).")


RECORD_TYPES: dict[str, type[Record]] = {
    cls.KIND: cls
    for cls in (
        Campaign,
        Direction,
        Experiment,
        Artifact,
        Dataset,
        Evaluation,
        Review,
        Finding,
        Skill,
        Orientation,
        SystemVersion,
        ProtocolFlag,
    )
}
"""Every stored record type by its ``KIND``."""


def record_type(kind: str) -> type[Record]:
    """The record class of a kind; raises ``KeyError`` naming the known kinds."""
    try:
        return RECORD_TYPES[kind]
    except KeyError:
        raise KeyError(f"unknown record kind {kind!r}; known: {sorted(RECORD_TYPES)}") from None


def kind_of_id(record_id: str) -> str | None:
    """The kind a record id belongs to, from its prefix, or None."""
    prefix = record_id.split("-", 1)[0]
    for cls in RECORD_TYPES.values():
        if prefix == cls.PREFIX:
            return cls.KIND
    return None


def json_schemas() -> dict[str, Any]:
    """JSON Schema of every record type (and of ledger events), with the schema version."""
    schemas: dict[str, Any] = {k: t.model_json_schema() for k, t in RECORD_TYPES.items()}
    schemas["event"] = Event.model_json_schema()
    return {"schema_version": SCHEMA_VERSION, "records": schemas}
