"""Research teams (AReaL-RSI): the Leader's assignments, and the review after a campaign."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from rsilab.records._base import Model, Record


class Assignment(Record):
    """A researcher's orientation in a team campaign, chosen by the Leader, with its reasons.

    Written once and never changed: a redirect is a new assignment naming the one it
    ``supersedes``, so the campaign's records hold who was oriented how, when and why.
    """

    KIND: ClassVar[str] = "assignment"
    PREFIX: ClassVar[str] = "asg"

    researcher: str = Field(description="The researcher's actor name, e.g. 'researcher-2'.")
    orientation: str = Field(description="Orientation name, e.g. 'explorer'.")
    orientation_id: str = Field(description="The Orientation record (version) in force.")
    reason: str = Field(description="Why, in words, citing the evidence.")
    evidence: list[str] = Field(default_factory=list, description="Ids of records it rests on.")
    supersedes: str | None = Field(
        default=None, description="The researcher's previous assignment, if any."
    )
    leader: str = Field(default="", description="Actor that assigned it.")

    def is_finished(self) -> bool:
        return True  # an assignment is history: a redirect is a new record

    def summary(self) -> str:
        return f"{self.id} {self.researcher} -> {self.orientation}"


class OrientationOutcome(Model):
    """What one orientation led to in a team campaign, from the records."""

    orientation: str = Field(description="Orientation name, e.g. 'explorer'.")
    orientation_ids: list[str] = Field(
        default_factory=list, description="The Orientation records (versions) it ran under."
    )
    researchers: list[str] = Field(default_factory=list, description="Who held it.")
    experiments: int = Field(default=0, description="Experiments made under it.")
    new_bests: int = Field(default=0, description="Of those, runs that set a new team best.")
    best_gain: float | None = Field(
        default=None, description="Its best dev target score minus the reference's."
    )
    supported_findings: int = Field(default=0, description="Supported findings it published.")
    candidates: int = Field(default=0, description="Candidates proposed from its experiments.")
    accepted: int = Field(default=0, description="Of those, accepted by the controller.")
    paid: int = Field(default=0, description="new_bests + supported_findings + accepted.")
    cpu_s: float = Field(default=0.0, description="CPU seconds of its experiments' jobs.")
    evidence: list[str] = Field(
        default_factory=list, description="Ids of the records counted (at most 50)."
    )


class FindingOutcome(Model):
    """What a finding led to in a team campaign: who followed it, and whether that paid."""

    finding_id: str = Field(description="The finding.")
    status: str = Field(description="Its status when the campaign ended.")
    origin_campaign_id: str | None = Field(default=None, description="Where it was published.")
    adoptions: int = Field(default=0, description="Adoptions recorded in this campaign.")
    adopting_experiments: list[str] = Field(
        default_factory=list, description="Experiments made following it."
    )
    paid: int = Field(
        default=0,
        description="Of those, runs that set a new team best or beat the reference "
        "by more than the noise floor.",
    )
    verdict: str = Field(default="", description="What it led to, in words.")


class RevisionProposal(Model):
    """A revision a campaign review proposes, and whether it was accepted."""

    kind: Literal["orientation", "skill", "knowledge"] = Field(description="What it revises.")
    name: str = Field(description="The orientation or skill name, or the finding id.")
    change: str = Field(description="What changes, in words.")
    reason: str = Field(description="Why, citing the outcomes.")
    evidence: list[str] = Field(default_factory=list, description="Ids of records it rests on.")
    accepted: bool = Field(default=False, description="Whether it was made.")
    why_not: str = Field(default="", description="Why it was not made, when it was not.")
    from_id: str | None = Field(default=None, description="The record it revises.")
    to_id: str | None = Field(default=None, description="The new record, when made.")


class CampaignReview(Record):
    """The review of a finished team campaign: what each orientation and finding led to,
    and the revisions of orientations, skills and knowledge the next campaign starts from.

    Written once, when the campaign ends; the revisions it accepted are new records (an
    Orientation or Skill version, a superseding Finding) named in ``revisions``.
    """

    KIND: ClassVar[str] = "campaign_review"
    PREFIX: ClassVar[str] = "crv"

    reviewer: str = Field(description="Actor that wrote it.")
    task: str = Field(description="Task name.")
    orientations: list[OrientationOutcome] = Field(default_factory=list)
    findings: list[FindingOutcome] = Field(default_factory=list)
    revisions: list[RevisionProposal] = Field(default_factory=list)
    conclusion: str = Field(default="", description="The review in a few sentences.")

    def is_finished(self) -> bool:
        return True

    def summary(self) -> str:
        made = sum(1 for r in self.revisions if r.accepted)
        return f"{self.id} review of {self.campaign_id}: {made}/{len(self.revisions)} revisions"
