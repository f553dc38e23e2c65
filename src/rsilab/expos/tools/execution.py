"""Execution and state tools: directions of the research DAG and the experiments under them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from rsilab.errors import ToolError
from rsilab.expos.context import ToolEnv
from rsilab.expos.registry import Category
from rsilab.expos.services import snapshot_workspace
from rsilab.expos.tools._base import FiniteFloat, Name, RecordId, Text, brief, require, tool
from rsilab.records import (
    Campaign,
    Dataset,
    Direction,
    DirectionChange,
    DirectionEdge,
    DirectionState,
    EdgeRelation,
    Experiment,
    ExperimentState,
    Metric,
    MetricSource,
    Review,
    Verdict,
    utc_now,
)


@tool(Category.EXECUTION)
def create_direction(
    env: ToolEnv,
    title: Name,
    hypothesis: Text,
    plan: Text = "",
    parents: list[DirectionEdge] = Field(default_factory=list, max_length=20),  # noqa: B008
) -> dict[str, Any]:
    """Add a direction (hypothesis and plan) to the campaign's research DAG.

    Args:
        title: short name of the direction.
        hypothesis: what is believed and would be tested.
        plan: how workers should test it.
        parents: edges from earlier directions: {"parent_id": ..., "relation":
            "continue" | "verify" | "branch" | "revise"}.
    """
    campaign = env.campaign(writable=True)
    for i, edge in enumerate(parents):
        env.read(edge.parent_id, Direction, field_name=f"parents.{i}.parent_id")
    direction = env.stage(
        Direction(
            campaign_id=campaign.id,
            title=title,
            hypothesis=hypothesis,
            plan=plan,
            parents=parents,
            created_by=env.call.actor,
        )
    )
    return {"id": direction.id}


@tool(Category.EXECUTION)
def list_directions(env: ToolEnv, state: DirectionState | None = None) -> dict[str, Any]:
    """List the campaign's directions with their edges and experiment counts.

    Args:
        state: only directions in this state (open, promising, supported, refuted, exhausted).
    """
    campaign = env.campaign()
    counts: dict[str, int] = {}
    for exp in env.readable_as(Experiment, fields={"campaign_id": campaign.id}):
        counts[exp.direction_id] = counts.get(exp.direction_id, 0) + 1
    items = []
    for d in env.readable_as(Direction, fields={"campaign_id": campaign.id}):
        if state is not None and d.state != state:
            continue
        items.append(
            {
                "id": d.id,
                "title": d.title,
                "state": str(d.state),
                "hypothesis": d.hypothesis,
                "parents": [e.model_dump(mode="json") for e in d.parents],
                "experiments": counts.get(d.id, 0),
            }
        )
    return {"directions": items}


TRANSITIONS: dict[DirectionState, frozenset[DirectionState]] = {
    DirectionState.OPEN: frozenset(
        {DirectionState.PROMISING, DirectionState.REFUTED, DirectionState.EXHAUSTED}
    ),
    DirectionState.PROMISING: frozenset(
        {
            DirectionState.SUPPORTED,
            DirectionState.REFUTED,
            DirectionState.EXHAUSTED,
            DirectionState.OPEN,
        }
    ),
}
"""Status changes ``update_direction`` allows; final states have none. ``supported`` is
reached only from ``promising``, so a result is re-run (a verify child) before it is claimed."""


def _evidence_scope(env: ToolEnv, direction: Direction) -> set[str]:
    """Ids of the direction and of its verify children: the experiments that may support it."""
    verify = DirectionEdge(parent_id=direction.id, relation=EdgeRelation.VERIFY)
    others = env.readable_as(Direction, fields={"campaign_id": direction.campaign_id})
    return {direction.id} | {d.id for d in others if verify in d.parents}


def _treatment(review: Review) -> list[str]:
    """The experiments a review judges: compared groups ``a`` if it computed effects, else all.

    Baselines (groups ``b``) may come from any direction; they are what was beaten.
    """
    if review.comparisons:
        return list(dict.fromkeys(i for c in review.comparisons for i in c.a_ids))
    return review.experiment_ids


def _cited_reviews(env: ToolEnv, direction: Direction, review_ids: list[str]) -> list[Review]:
    """The cited reviews, each checked to judge experiments of the direction's scope only."""
    scope = _evidence_scope(env, direction)
    reviews = []
    for i, review_id in enumerate(review_ids):
        field = f"review_ids.{i}"
        review = env.read(review_id, Review, field_name=field)
        exps = [env.read(e, Experiment, field_name=field) for e in _treatment(review)]
        require(
            {e.direction_id for e in exps} <= scope,
            "invalid_arguments",
            f"review {review.id} judged experiments outside direction {direction.id} and its "
            "verify children",
            field,
        )
        reviews.append(review)
    return reviews


@tool(Category.EXECUTION)
def update_direction(
    env: ToolEnv,
    direction_id: RecordId,
    status: DirectionState,
    conclusion: Text = "",
    review_ids: list[RecordId] = Field(default_factory=list, max_length=20),  # noqa: B008
) -> dict[str, Any]:
    """Move a direction along its lifecycle; supported, refuted and exhausted are final.

    Allowed: open -> promising, refuted, exhausted; promising -> supported, refuted,
    exhausted, open. ``supported`` needs evidence, not an assertion: at least one cited
    review must have the verdict ``supports``. Every cited review must judge only
    experiments of this direction or of its verify children (directions with a ``verify``
    edge from it): the treatment groups of its computed comparisons, or all the experiments
    it read when it computed none. Baselines may come from anywhere.

    Args:
        direction_id: the direction to update.
        status: open, promising, supported, refuted or exhausted.
        conclusion: why, in words.
        review_ids: reviews cited as evidence (required for supported).
    """
    env.campaign(writable=True)
    direction = env.read(direction_id, Direction, field_name="direction_id")
    allowed = TRANSITIONS.get(direction.state, frozenset())
    if status not in allowed:
        options = ", ".join(sorted(allowed)) or "none: it is final"
        raise ToolError(
            "conflict",
            f"direction {direction.id} is {direction.state}; it may become: {options}",
            field="status",
        )
    reviews = _cited_reviews(env, direction, review_ids)
    require(
        status != DirectionState.SUPPORTED or any(r.verdict == Verdict.SUPPORTS for r in reviews),
        "invalid_arguments",
        "supported needs a cited review with the verdict 'supports' over experiments of this "
        "direction or of a verify child",
        "review_ids",
    )
    change = DirectionChange(
        status=status,
        previous=direction.state,
        by=env.call.actor,
        review_ids=[r.id for r in reviews],
        conclusion=conclusion,
    )
    env.stage(
        direction.model_copy(
            update={
                "state": status,
                "conclusion": conclusion or direction.conclusion,
                "history": [*direction.history, change],
            }
        )
    )
    return {"id": direction.id, "state": str(status), "previous": str(direction.state)}


def _require_experiment_budget(env: ToolEnv, campaign: Campaign) -> None:
    """Refuse a new experiment once the campaign's experiment budget is spent.

    The budget is the one the campaign was started with (``settings["budget"]``, as the
    runners record it); a campaign opened without one has no limit here. Every experiment
    counts, failed and verification runs too, since each one spent the compute, except the
    cancelled: a stopped runner's open experiments are closed so and re-run as new attempts.
    """
    from rsilab.tasks import Budget

    stored = campaign.settings.get("budget")
    if stored is None:
        return
    try:
        limit = Budget.model_validate(stored).experiments
    except ValueError:
        return  # a budget this version cannot read does not block the campaign's work
    experiments = env.store.query_as(Experiment, campaign_id=campaign.id)
    used = sum(e.state is not ExperimentState.CANCELLED for e in experiments)
    require(
        used < limit,
        "budget_exhausted",
        f"the campaign's experiment budget is spent ({used} of {limit}); create no more "
        "experiments: record your conclusions (finish_experiment, submit_review) and end "
        "your step",
    )


@tool(Category.EXECUTION)
def create_experiment(
    env: ToolEnv,
    direction_id: RecordId,
    description: Text,
    config: dict[str, Any] = Field(default_factory=dict),  # noqa: B008
    parent_experiment_id: RecordId | None = None,
    data: list[Name] = Field(default_factory=list, max_length=50),  # noqa: B008
) -> dict[str, Any]:
    """Open an experiment under a direction, recording its configuration and the data it uses.

    Args:
        direction_id: the open or promising direction the experiment serves.
        description: what the experiment changes or tests.
        config: the configuration it runs with (JSON object).
        parent_experiment_id: an earlier experiment this one builds on.
        data: dataset ids or names from the data pool that it uses.
    """
    from rsilab.expos.tools.data import find_dataset

    campaign = env.campaign(writable=True)
    _require_experiment_budget(env, campaign)
    direction = env.read(direction_id, Direction, field_name="direction_id")
    require(
        direction.state.accepts_experiments(),
        "conflict",
        f"direction {direction.id} is {direction.state}; create a new direction",
        "direction_id",
    )
    if parent_experiment_id is not None:
        env.read(parent_experiment_id, Experiment, field_name="parent_experiment_id")
    datasets: list[Dataset] = [find_dataset(env, ref, f"data.{i}") for i, ref in enumerate(data)]
    exp = env.stage(
        Experiment(
            campaign_id=campaign.id,
            direction_id=direction.id,
            description=description,
            config=config,
            parent_experiment_id=parent_experiment_id,
            data_ids=[d.id for d in datasets],
            created_by=env.call.actor,
        )
    )
    return {"id": exp.id, "state": str(exp.state)}


@tool(Category.EXECUTION)
def get_experiment(env: ToolEnv, experiment_id: RecordId) -> dict[str, Any]:
    """Return an experiment's full record: config, data, metrics, state, resources.

    Args:
        experiment_id: the experiment.
    """
    exp = env.read(experiment_id, Experiment, field_name="experiment_id")
    return {"experiment": exp.model_dump(mode="json")}


def _open_experiment(env: ToolEnv, experiment_id: str) -> Experiment:
    env.campaign(writable=True)
    exp = env.read(experiment_id, Experiment, field_name="experiment_id")
    if exp.is_finished():
        raise ToolError(
            "conflict",
            f"experiment {exp.id} is {exp.state} and cannot change; create a new experiment",
            field="experiment_id",
        )
    return exp


@tool(Category.EXECUTION)
def log_metric(
    env: ToolEnv,
    experiment_id: RecordId,
    name: Name,
    value: FiniteFloat,
    split: Literal["train", "dev"] = "dev",
    step: int | None = Field(default=None, ge=0),
) -> dict[str, Any]:
    """Record a number measured by the worker. It is marked agent-reported and never counts.

    Only the Host Controller's private evaluations decide acceptance; this is for the
    worker's own bookkeeping and the reviewers' comparisons.

    Args:
        experiment_id: an experiment that is not finished.
        name: metric name, e.g. 'accuracy'.
        value: the value.
        split: 'train' or 'dev'; private tiers cannot be logged.
        step: training step or epoch, if any.
    """
    exp = _open_experiment(env, experiment_id)
    metric = Metric(
        name=name, value=value, split=split, step=step, source=MetricSource.AGENT_REPORTED
    )
    state = ExperimentState.RUNNING if exp.state == ExperimentState.CREATED else exp.state
    env.stage(exp.model_copy(update={"metrics": [*exp.metrics, metric], "state": state}))
    return {"experiment_id": exp.id, "metrics": len(exp.metrics) + 1, "source": str(metric.source)}


@tool(Category.EXECUTION)
def finish_experiment(
    env: ToolEnv,
    experiment_id: RecordId,
    status: Literal["succeeded", "failed", "cancelled"],
    summary: Text = "",
) -> dict[str, Any]:
    """Close an experiment. Afterwards it is immutable; the workspace is snapshotted.

    Args:
        experiment_id: an experiment that is not finished.
        status: succeeded, failed or cancelled.
        summary: what the worker concluded.
    """
    exp = _open_experiment(env, experiment_id)
    workspace_hash = exp.workspace_hash
    workspace = env.workspace()
    if workspace is not None and Path(workspace).is_dir():
        # the same snapshot a proposal takes: the Experiment OS's own folders are left out
        workspace_hash = snapshot_workspace(env.artifacts, Path(workspace))
    done = env.stage(
        exp.model_copy(
            update={
                "state": ExperimentState(status),
                "summary_text": summary,
                "finished_at": utc_now(),
                "workspace_hash": workspace_hash,
            }
        )
    )
    return {**brief(done), "state": str(done.state), "workspace_hash": workspace_hash}
