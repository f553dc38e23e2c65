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

from typing import Any

from rsilab.records._base import SCHEMA_VERSION, Model, Record, Role, new_id, utc_now
from rsilab.records._campaign import (
    CampaignLease,
    Intent,
    IntentState,
    LeaseHolder,
    intent_id,
    lease_id,
)
from rsilab.records._control import (
    BenchmarkDecision,
    Candidate,
    CandidateState,
    Job,
    JobInputs,
    JobKind,
    JobStatus,
    Lineage,
    lineage_id,
)
from rsilab.records._data import (
    Artifact,
    Dataset,
    DataTier,
    Evaluation,
    Interval,
    ProvenanceNote,
    SampleScore,
)
from rsilab.records._evidence import (
    Adoption,
    Comparison,
    Finding,
    FindingClaim,
    FindingStatus,
    FlagStage,
    Orientation,
    ProtocolFlag,
    Recommendation,
    Review,
    Skill,
    SystemVersion,
    Verdict,
)
from rsilab.records._evolution import Evolution, EvolutionRound, EvolutionState
from rsilab.records._gc import Tombstone
from rsilab.records._guidance import Guidance
from rsilab.records._ledger import Event, EventDraft, Outcome, RecordRef
from rsilab.records._research import (
    Campaign,
    CampaignState,
    Direction,
    DirectionChange,
    DirectionEdge,
    DirectionState,
    EdgeRelation,
    EndReason,
    Experiment,
    ExperimentState,
    Metric,
    MetricSource,
    Resources,
    TaskRef,
    unconfined_note,
)
from rsilab.records._team import (
    Assignment,
    CampaignReview,
    FindingOutcome,
    OrientationOutcome,
    RevisionProposal,
)
from rsilab.records._tokens import AgentToken

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
        Adoption,
        Skill,
        Orientation,
        SystemVersion,
        ProtocolFlag,
        Job,
        Candidate,
        Lineage,
        Tombstone,
        CampaignLease,
        Intent,
        Guidance,
        Evolution,
        Assignment,
        CampaignReview,
        AgentToken,
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


__all__ = [
    "RECORD_TYPES",
    "SCHEMA_VERSION",
    "Adoption",
    "AgentToken",
    "Artifact",
    "Assignment",
    "BenchmarkDecision",
    "Campaign",
    "CampaignLease",
    "CampaignReview",
    "CampaignState",
    "Candidate",
    "CandidateState",
    "Comparison",
    "DataTier",
    "Dataset",
    "Direction",
    "DirectionChange",
    "DirectionEdge",
    "DirectionState",
    "EdgeRelation",
    "EndReason",
    "Evaluation",
    "Event",
    "EventDraft",
    "Evolution",
    "EvolutionRound",
    "EvolutionState",
    "Experiment",
    "ExperimentState",
    "Finding",
    "FindingClaim",
    "FindingOutcome",
    "FindingStatus",
    "FlagStage",
    "Guidance",
    "Intent",
    "IntentState",
    "Interval",
    "Job",
    "JobInputs",
    "JobKind",
    "JobStatus",
    "LeaseHolder",
    "Lineage",
    "Metric",
    "MetricSource",
    "Model",
    "Orientation",
    "OrientationOutcome",
    "Outcome",
    "ProtocolFlag",
    "ProvenanceNote",
    "Recommendation",
    "Record",
    "RecordRef",
    "Resources",
    "Review",
    "RevisionProposal",
    "Role",
    "SampleScore",
    "Skill",
    "SystemVersion",
    "TaskRef",
    "Tombstone",
    "Verdict",
    "intent_id",
    "json_schemas",
    "kind_of_id",
    "lease_id",
    "lineage_id",
    "new_id",
    "record_type",
    "unconfined_note",
    "utc_now",
]
