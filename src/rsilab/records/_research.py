"""Tasks, campaigns, the research DAG and experiments."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import Field

from rsilab.records._base import Model, Record, utc_now

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
