"""Evolutions: a system improved over rounds, each round a campaign on what the last accepted."""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar

from pydantic import Field

from rsilab.errors import ConflictError
from rsilab.records._base import Model, Record


class EvolutionState(StrEnum):
    """Lifecycle of an evolution: running, then finished (every round ran) or stopped."""

    RUNNING = "running"
    FINISHED = "finished"
    STOPPED = "stopped"

    def is_finished(self) -> bool:
        return self is EvolutionState.FINISHED


class EvolutionRound(Model):
    """One round: the campaign it ran, who improved, and what the lineage head became."""

    round: int = Field(ge=1, description="Round number, from 1.")
    campaign_id: str = Field(description="The round's campaign.")
    improver: str = Field(
        description="Who improved: for a harness improver, the version whose harness acted "
        "(``self: H1/M1 ver-...``); else rsilab's runner (``teacher: builtin policy``)."
    )
    improver_version_id: str | None = Field(
        default=None, description="The version whose harness acted as improver, if one did."
    )
    head_before: str = Field(description="The lineage head when the round started.")
    head_after: str = Field(description="The lineage head when the round ended.")
    accepted: bool = Field(description="True when the round moved the head (else it was kept).")
    state: str = Field(description="The campaign's state at the round's end.")
    wall_s: float = Field(ge=0, description="Wall seconds the round took.")
    tool_calls: int = Field(ge=0, description="Tool calls by agent roles in the round's campaign.")
    note: str = Field(default="", description="How the round ended, in words.")


class Evolution(Record):
    """An evolution of one lineage over rounds (``rsilab evolve``); lab-wide.

    Rounds are appended as they end and never change afterwards; a finished evolution is final.
    """

    KIND: ClassVar[str] = "evolution"
    PREFIX: ClassVar[str] = "evo"

    task: str = Field(description="Task name.")
    lineage: str = Field(default="main", description="Lineage name.")
    improver: str = Field(description="The improver spec: self, teacher or teacher:SPEC.")
    rounds_planned: int = Field(ge=1, description="Rounds asked for.")
    budget: str = Field(description="Each round's budget (the same every round).")
    seed: int = Field(default=0, description="Seed of round 1 (round r uses seed + r - 1).")
    start_version_id: str = Field(description="The lineage head before round 1 (round 0).")
    teacher_version_id: str | None = Field(
        default=None,
        description="Under ``teacher``: the version whose harness improves in every round.",
    )
    rounds: list[EvolutionRound] = Field(
        default_factory=list, description="Rounds that ended, in order."
    )
    state: EvolutionState = Field(default=EvolutionState.RUNNING, description="Lifecycle state.")
    message: str = Field(default="", description="Why it ended, once it has.")
    finished_at: str | None = Field(default=None, description="When it ended, ISO-8601 UTC.")

    def is_finished(self) -> bool:
        return self.state.is_finished()

    def check_update(self, previous: Record) -> None:
        super().check_update(previous)
        assert isinstance(previous, Evolution)
        fixed = ("task", "lineage", "improver", "rounds_planned", "budget", "seed")
        for name in (*fixed, "start_version_id", "teacher_version_id"):
            if getattr(previous, name) != getattr(self, name):
                raise ConflictError(f"evolution {self.id}: field {name!r} cannot change")
        if self.rounds[: len(previous.rounds)] != previous.rounds:
            raise ConflictError(f"evolution {self.id}: ended rounds cannot change")

    def summary(self) -> str:
        return (
            f"{self.id} {self.task}/{self.lineage} {self.improver} "
            f"{len(self.rounds)}/{self.rounds_planned} rounds [{self.state}]"
        )
