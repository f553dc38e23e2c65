"""Reviews, shared memory (findings, skills, orientations), versions and protocol flags."""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import Field

from rsilab.records._base import Model, Record
from rsilab.records._data import Interval

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


class FindingClaim(Model):
    """A claim the records can check: group a's mean of ``metric`` is higher (lower) than b's."""

    metric: str = Field(description="Dev metric compared.")
    a_ids: list[str] = Field(description="Experiments of group a.")
    b_ids: list[str] = Field(description="Experiments of group b.")
    direction: Literal["higher", "lower"] = Field(
        description="The claim: a's mean is higher, or lower, than b's."
    )


class Finding(Record):
    """A shared-memory entry with its conditions, uncertainty and sources.

    Findings are lab-wide (``campaign_id`` None) so later campaigns on the task read them;
    ``origin_campaign_id`` names the campaign that published one. ``status`` is what the tool
    stored, never more than the records support: a claim they do not bear out is kept as
    unresolved, with ``claimed_status`` saying what its author asked for.
    """

    KIND: ClassVar[str] = "finding"
    PREFIX: ClassVar[str] = "fnd"

    claim: str = Field(description="What was found.")
    status: FindingStatus = Field(description="supported, unresolved or refuted.")
    conditions: str = Field(default="", description="Conditions under which it held.")
    uncertainty: str = Field(default="", description="How sure, and why.")
    sources: list[str] = Field(default_factory=list, description="Source record ids.")
    author: str = Field(default="", description="Actor that published it.")
    task: str = Field(default="", description="Task it is about.")
    origin_campaign_id: str | None = Field(default=None, description="Campaign that published it.")
    structured: FindingClaim | None = Field(
        default=None, description="The claim in a form the records can check."
    )
    effect: Interval | None = Field(
        default=None, description="a - b on the metric, recomputed from the records."
    )
    claimed_status: FindingStatus | None = Field(
        default=None, description="Status the author asked for, when another was stored."
    )
    check: str = Field(default="", description="Why the stored status is what it is.")
    tags: list[str] = Field(default_factory=list, description="Knobs and topics it concerns.")
    orientation: str = Field(default="", description="Orientation of the author.")
    supersedes: str | None = Field(
        default=None, description="An earlier finding this one revises or refutes."
    )

    def summary(self) -> str:
        return f"{self.id} [{self.status}] {self.claim[:60]!r}"


class Adoption(Record):
    """A campaign's use of a finding: adopted as is, or adapted, with what it was used in."""

    KIND: ClassVar[str] = "adoption"
    PREFIX: ClassVar[str] = "adp"

    finding_id: str = Field(description="The finding adopted.")
    mode: Literal["adopted", "adapted"] = Field(description="Used as is, or changed.")
    note: str = Field(default="", description="How it was used or changed.")
    experiment_ids: list[str] = Field(default_factory=list, description="Experiments that used it.")
    direction_id: str | None = Field(default=None, description="Direction that used it.")
    actor: str = Field(default="", description="Actor that adopted it.")

    def summary(self) -> str:
        return f"{self.id} {self.mode} {self.finding_id}"


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
    weight: float = Field(
        default=1.0,
        gt=0,
        description="How much of a team it should get at the start, against the others "
        "(the built-in Leader orders its start plan by it); a campaign review revises it.",
    )

    def summary(self) -> str:
        return f"{self.id} {self.name} v{self.version}"


class SystemVersion(Record):
    """An accepted (or proposed) system in a lineage: harness H_i plus model M_j."""

    KIND: ClassVar[str] = "version"
    PREFIX: ClassVar[str] = "ver"

    task: str = Field(default="", description="Task name.")
    lineage: str = Field(default="main", description="Lineage name.")
    label: str = Field(description="Human label, e.g. 'H1/M0'.")
    harness_sha256: str = Field(description="Tree hash of the harness.")
    model_sha256: str | None = Field(default=None, description="Hash of the model artifact.")
    model_sha256s: list[str] = Field(
        default_factory=list, description="Model of each controller seed (recorded jobs made them)."
    )
    seeds: list[int] = Field(default_factory=list, description="Controller's training seeds.")
    parent_id: str | None = Field(default=None, description="Version it was derived from.")
    candidate_id: str | None = Field(default=None, description="Candidate it was accepted from.")
    rollback_of: str | None = Field(default=None, description="Version a rollback restored.")
    scores: dict[str, Interval] = Field(
        default_factory=dict, description="Final-tier score per benchmark."
    )
    evaluation_ids: list[str] = Field(
        default_factory=list, description="Its private evaluations (accept and final tiers)."
    )
    decision: str = Field(default="", description="Why it was accepted or rejected.")
    reference_evaluation_ids: list[str] = Field(
        default_factory=list,
        description="Accept-tier evaluations of it as the head a candidate was compared with, "
        "on that comparison's controller seeds (each sample score names its seed); kept so a "
        "re-judged comparison reuses them.",
    )

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
