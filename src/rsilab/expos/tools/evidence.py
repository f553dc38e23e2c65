"""Research and evidence tools: find records, follow their lineage, compare experiments."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import Field

from rsilab.errors import NotFoundError, ToolError
from rsilab.expos import policy
from rsilab.expos.context import ToolEnv
from rsilab.expos.registry import Category
from rsilab.expos.tools._base import Limit, Name, RecordId, brief, tool
from rsilab.expos.tools._numbers import COMPARED_SOURCES
from rsilab.records import Direction, Experiment, Metric, Record, SystemVersion

R = TypeVar("R", bound=Record)


@tool(Category.EVIDENCE)
def search_records(
    env: ToolEnv,
    text: str | None = Field(default=None, max_length=500),
    kind: str | None = None,
    fields: dict[str, Any] = Field(default_factory=dict),  # noqa: B008
    limit: Limit = 20,
) -> dict[str, Any]:
    """Find records the caller may read by text and by field values, oldest first.

    Args:
        text: case-insensitive text to look for anywhere in the record.
        kind: record kind (experiment, direction, review, dataset, finding, ...).
        fields: top-level fields that must be equal, e.g. {"state": "succeeded"}.
        limit: how many records to return.
    """
    allowed = policy.readable_kinds(env.call.role)
    if kind is not None and kind not in allowed:
        raise ToolError(
            "invalid_arguments",
            f"kind {kind!r} is unknown or not readable by the {env.call.role} role",
            field="kind",
            expected="one of " + ", ".join(sorted(allowed)),
        )
    found = env.readable(kind, fields=fields or None, text=text, limit=limit)
    return {"records": [brief(r) for r in found], "count": len(found)}


def _history(env: ToolEnv, record_id: str) -> list[dict[str, Any]]:
    return [
        {"seq": e.seq, "at": e.at, "actor": e.actor, "action": e.action, "tool": e.tool}
        for e in env.store.events(record_id=record_id, limit=200)
    ]


def _parent_chain(env: ToolEnv, start: R, parent_of: Callable[[R], str | None]) -> list[R]:
    """Follow single-parent links from ``start`` (not included), stopping at any cycle."""
    chain: list[R] = []
    current, seen = start, {start.id}
    while (parent_id := parent_of(current)) and parent_id not in seen:
        current = env.read(parent_id, type(start))
        seen.add(current.id)
        chain.append(current)
    return chain


def _experiment_lineage(env: ToolEnv, exp: Experiment) -> dict[str, Any]:
    chain = [brief(e) for e in _parent_chain(env, exp, lambda e: e.parent_experiment_id)]
    children = env.readable_as(Experiment, fields={"parent_experiment_id": exp.id})
    return {
        "ancestors": chain,
        "children": [brief(c) for c in children],
        "direction": brief(env.read(exp.direction_id, Direction)),
    }


def _direction_lineage(env: ToolEnv, direction: Direction) -> dict[str, Any]:
    ancestors: list[dict[str, Any]] = []
    frontier, seen = list(direction.parents), {direction.id}
    while frontier:
        edge = frontier.pop(0)
        if edge.parent_id in seen:
            continue
        seen.add(edge.parent_id)
        parent = env.read(edge.parent_id, Direction)
        ancestors.append({**brief(parent), "relation": str(edge.relation)})
        frontier.extend(parent.parents)
    children = [
        {**brief(d), "relation": str(e.relation)}
        for d in env.readable_as(Direction, fields={"campaign_id": direction.campaign_id})
        for e in d.parents
        if e.parent_id == direction.id
    ]
    experiments = env.readable_as(Experiment, fields={"direction_id": direction.id})
    return {
        "ancestors": ancestors,
        "children": children,
        "experiments": [brief(x) for x in experiments],
    }


def _version_lineage(env: ToolEnv, version: SystemVersion) -> dict[str, Any]:
    return {"ancestors": [brief(v) for v in _parent_chain(env, version, lambda v: v.parent_id)]}


@tool(Category.EVIDENCE)
def get_lineage(env: ToolEnv, record_id: RecordId) -> dict[str, Any]:
    """Show where a record comes from: its ancestors, children and the events that wrote it.

    Experiments follow their parent experiments and direction; directions follow the DAG;
    versions follow their parents. Every record also lists its ledger history.

    Args:
        record_id: any record id the caller may read.
    """
    try:
        record: Record = env.store.get(record_id)
    except NotFoundError:
        raise ToolError("not_found", f"no record {record_id!r}", field="record_id") from None
    env.check_readable(record)
    out: dict[str, Any] = {"record": brief(record)}
    if isinstance(record, Experiment):
        out |= _experiment_lineage(env, record)
    elif isinstance(record, Direction):
        out |= _direction_lineage(env, record)
    elif isinstance(record, SystemVersion):
        out |= _version_lineage(env, record)
    out["history"] = _history(env, record.id)
    return out


def _last_values(exp: Experiment) -> dict[str, Metric]:
    """``split/name`` -> the value a comparison reads (:data:`COMPARED_SOURCES`), per metric."""
    keys = dict.fromkeys((m.split, m.name) for m in exp.metrics)
    found = {
        f"{split}/{name}": exp.last_metric(name, split=split, sources=COMPARED_SOURCES)
        for split, name in keys
    }
    return {key: m for key, m in found.items() if m is not None}


@tool(Category.EVIDENCE)
def compare_experiments(
    env: ToolEnv,
    experiment_ids: list[RecordId] = Field(min_length=2, max_length=20),  # noqa: B008
    metric: Name | None = None,
) -> dict[str, Any]:
    """Put experiments side by side: configs (and which keys differ) and their last metrics.

    Numbers shown are as recorded, with their source; agent-reported numbers never count. Each
    metric shows the controller's last value where it has one, else the last value logged.

    Args:
        experiment_ids: two to twenty experiment ids.
        metric: only this metric name (e.g. 'accuracy'); all metrics if omitted.
    """
    exps = [
        env.read(eid, Experiment, field_name=f"experiment_ids.{i}")
        for i, eid in enumerate(experiment_ids)
    ]
    keys = sorted({k for e in exps for k in e.config})
    differing = [k for k in keys if len({repr(e.config.get(k)) for e in exps}) > 1]
    rows = []
    for exp in exps:
        values = _last_values(exp)
        if metric is not None:
            values = {k: m for k, m in values.items() if m.name == metric}
        rows.append(
            {
                "id": exp.id,
                "state": str(exp.state),
                "direction_id": exp.direction_id,
                "config": {k: exp.config.get(k) for k in differing},
                "metrics": {k: m.value for k, m in values.items()},
                "sources": {k: str(m.source) for k, m in values.items()},
            }
        )
    return {"differing_config_keys": differing, "experiments": rows}
