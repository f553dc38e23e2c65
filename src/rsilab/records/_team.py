"""Research teams (AReaL-RSI): the Leader's assignment of an orientation to a researcher."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from rsilab.records._base import Record


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
