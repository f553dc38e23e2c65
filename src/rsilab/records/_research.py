"""Tasks, campaigns, the research DAG and experiments."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from rsilab.records._base import Model, Record, utc_now

# --- Task and campaign -------------------------------------------------------------------------


class TaskRef(Model):
    """A reference to a task: enough to find and check it again later, from any folder
    (``rsilab.tasks.load_ref`` loads it; ``Task.ref`` makes it)."""

    name: str = Field(description="Task name, e.g. 'digits'.")
    source: str = Field(
        default="",
        description="Where the task came from: 'builtin'; an absolute task.toml path; an "
        "absolute 'file.py:NAME'; or a module that registered it. Older labs: a path as typed.",
    )
    digest: str | None = Field(
        default=None,
        description="sha256 of the task spec (relative paths made absolute), when known; a "
        "file's task whose digest differs is refused as changed.",
    )


class CampaignState(StrEnum):
    """Lifecycle of a campaign."""

    RUNNING = "running"
    STOPPED = "stopped"
    FINISHED = "finished"
    FAILED = "failed"

    def is_finished(self) -> bool:
        return self in {CampaignState.FINISHED, CampaignState.FAILED}


class EndReason(StrEnum):
    """Why a campaign run ended: recorded on the campaign and in the detail of its last event.

    A run that ends ``stopped`` may be resumed; one that ends ``finished`` is final.
    """

    BUDGET_SPENT = "budget_spent"
    """Finished: its experiment or token budget is spent."""
    AGENTS_DONE = "agents_done"
    """Finished: its agents left nothing to do (no open direction)."""
    ROUND_OVER = "round_over"
    """Finished: a round of an evolution that its runner stopped (its wall budget, say)."""
    WALL_BUDGET = "wall_budget"
    """Stopped: its wall-clock budget passed; a resume gets it afresh."""
    IDLE = "idle"
    """Stopped: its agents made no experiment for several rounds; guide them and resume."""
    STOPPED_BY_USER = "stopped_by_user"
    """Stopped: a person asked (Ctrl-C, a stop request)."""
    EXPERIMENTS_FAILING = "experiments_failing"
    """Stopped: its experiments kept failing (the campaign's recorded limit of failures in a
    row); nothing is proposed. Fix the cause and resume."""
    ERROR = "error"
    """Stopped: an error ended the run; the detail names its kind. Resumable."""
    LLM_UNAVAILABLE = "llm_unavailable"
    """Stopped: the LLM endpoint stayed out of reach (no connection, timeouts, 5xx or 429)
    through the client's retries; the step it cut short runs again on resume."""
    AGENT_SILENT = "agent_silent"
    """Stopped: the LLM Main agent answered without any tool call, even when asked again, and
    left no open direction; its step runs again on resume (give guidance first)."""
    PREFLIGHT_FAILED = "preflight_failed"
    """Stopped: a check before the first experiment failed (the baseline, say). Resumable."""


class Campaign(Record):
    """One run of the orchestrator on a task."""

    KIND: ClassVar[str] = "campaign"
    PREFIX: ClassVar[str] = "cmp"

    task: TaskRef = Field(description="The task this campaign improves.")
    state: CampaignState = Field(default=CampaignState.RUNNING, description="Lifecycle state.")
    settings: dict[str, Any] = Field(default_factory=dict, description="Budget, setting, seed.")
    notes: str = Field(default="", description="Free text from the person who started it.")
    end_reason: EndReason | None = Field(
        default=None, description="Why its last run ended; None while it has not ended."
    )
    end_detail: str = Field(
        default="", description="The end in words: an error's kind and message, for one."
    )

    def model_post_init(self, __context: Any) -> None:
        super().model_post_init(__context)
        if self.campaign_id is None:  # a campaign belongs to itself, so agents see only theirs
            self.campaign_id = self.id

    def is_finished(self) -> bool:
        return self.state.is_finished()

    def summary(self) -> str:
        return f"{self.id} {self.task.name} [{self.state}]"

    def unconfined(self) -> str | None:
        """Why this campaign's work was not held by the sandbox (:func:`unconfined_note`)."""
        return unconfined_note(self.settings)


def unconfined_note(settings: Mapping[str, Any]) -> str | None:
    """Why a campaign with these settings was not held by the sandbox, in one sentence, or None.

    Its jobs ran unsandboxed (a person opted in: ``unsandboxed``), or its improver was a client
    on the host (``improvers = "host"``: a campaign made with ``rsilab campaign new`` for an MCP
    client or the Python API), which can read whatever its user can. Reports and the dashboard
    show this sentence on the campaign.
    """
    if settings.get("unsandboxed"):
        where = settings.get("sandbox", "plain processes")
        return (
            f"its jobs ran in the `{where}` sandbox, which is NOT a security boundary (a "
            "person opted in); code an agent wrote could read what this user can"
        )
    if settings.get("improvers") == "host":
        return (
            "its improver ran on the host, not in the sandbox (a campaign opened for an MCP "
            "client or the Python API); it could read what this user can, and only the content "
            "guard stood between it and the private data"
        )
    return None


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
    """Lifecycle of a direction; supported, refuted and exhausted are final.

    ``open``: being tested. ``promising``: a result looks good but has not been re-run with
    fresh seeds. ``supported``: a review of this direction's (or a verify child's)
    experiments supports it. ``refuted``: the evidence speaks against it. ``exhausted``:
    stopped without a claim either way (out of ideas, budget or interest).

    A supported direction is final because the claim rests on a review that does not change;
    further checking happens in a new ``verify`` child, which gets a record of its own.
    """

    OPEN = "open"
    PROMISING = "promising"
    SUPPORTED = "supported"
    REFUTED = "refuted"
    EXHAUSTED = "exhausted"

    def is_finished(self) -> bool:
        return self not in {DirectionState.OPEN, DirectionState.PROMISING}

    def accepts_experiments(self) -> bool:
        """True while experiments may be created under a direction in this state."""
        return not self.is_finished()


LEGACY_DIRECTION_STATES: dict[str, DirectionState] = {
    "concluded": DirectionState.EXHAUSTED,
    "abandoned": DirectionState.EXHAUSTED,
}
"""States written before schema 3, read as their nearest current state.

Both become ``exhausted``: neither was backed by a review, so reading them as ``supported``
or ``refuted`` would invent an evidential claim. The stored text is left as written (the
ledger holds its digest), so a field filter on ``state`` in ``Store.query`` still sees the
old label; filter loaded records instead.
"""


class DirectionChange(Model):
    """One status change of a direction, kept on the direction as its history."""

    status: DirectionState = Field(description="The state set.")
    previous: DirectionState = Field(description="The state before.")
    by: str = Field(default="", description="Actor that made the change.")
    at: str = Field(default_factory=utc_now, description="When, ISO-8601 UTC.")
    review_ids: list[str] = Field(default_factory=list, description="Reviews cited as evidence.")
    conclusion: str = Field(default="", description="Why, in words.")


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
    conclusion: str = Field(default="", description="Why it reached its current state.")
    history: list[DirectionChange] = Field(
        default_factory=list, description="Status changes, oldest first."
    )

    @field_validator("state", mode="before")
    @classmethod
    def _read_legacy_state(cls, value: Any) -> Any:
        return LEGACY_DIRECTION_STATES.get(value, value) if isinstance(value, str) else value

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
    gpu_s: float | None = Field(
        default=None, description="GPU-seconds (GPUs held x wall seconds); None: no GPU used."
    )
    gpu_memory_mb: float | None = Field(
        default=None,
        description="Peak GPU memory of the job's processes, MiB, sampled (a lower bound); "
        "None: no GPU, or not measured (no nvidia-smi).",
    )


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

    def last_metric(
        self,
        name: str,
        *,
        split: Literal["train", "dev"] = "dev",
        sources: Collection[MetricSource] = (MetricSource.CONTROLLER,),
    ) -> Metric | None:
        """The experiment's last value of metric ``name`` on ``split`` (dev by default), as the
        :class:`Metric` logged, so with its source; None when no source in ``sources`` has one.

        The one rule for "an experiment's dev score": when ``sources`` admits the controller and
        it logged a value, the last controller value, however many numbers of other sources came
        after it (only the controller's numbers count, and a worker must not displace one by
        logging a later number); otherwise the last value of the other admitted sources. "Last"
        is the order of :attr:`metrics`, which is the order the values were measured in.
        ``sources`` is the controller alone by default; pass every :class:`MetricSource` to fall
        back on a worker's own numbers where the controller has none.
        """
        admitted = [
            m for m in self.metrics if m.name == name and m.split == split and m.source in sources
        ]
        controller = [m for m in admitted if m.source is MetricSource.CONTROLLER]
        chosen = controller or admitted
        return chosen[-1] if chosen else None
