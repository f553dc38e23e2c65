"""Artifacts, the data pool and evaluations."""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import Field

from rsilab.errors import ConflictError
from rsilab.records._base import Model, Record, utc_now

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
