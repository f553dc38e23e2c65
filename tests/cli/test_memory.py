"""``rsilab memory``: findings with status and recomputed effect; skills and orientations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rsilab.expos import CallContext, ExperimentOS, default_registry, open_campaign
from rsilab.memory import revise_orientation, revise_skill
from rsilab.records import Role, TaskRef
from rsilab.store import Lab
from tests.cli.helpers import explain, rsilab

WHO: dict[str, Any] = {"actor": "campaign-review", "role": Role.CONTROLLER}


def _call(expos: ExperimentOS, ctx: CallContext, tool: str, args: dict[str, Any]) -> Any:
    result = expos.call(ctx, tool, args)
    assert result.ok, result.to_dict()
    assert result.value is not None
    return result.value


def _populate(lab: Path, campaign_id: str) -> dict[str, str]:
    """A supported finding, an open problem superseding nothing, one on iris, an adoption, and
    revised skills and orientations."""
    with Lab.open(lab) as opened:
        expos = ExperimentOS(opened.store, opened.artifacts, default_registry())
        main = CallContext("main-1", Role.MAIN, campaign_id)
        worker = CallContext("worker-1", Role.WORKER, campaign_id)
        direction = _call(expos, main, "create_direction", {"title": "t", "hypothesis": "h"})["id"]
        groups: list[list[str]] = [[], []]
        for group, values in zip(groups, ([0.81, 0.84, 0.86], [0.70, 0.72, 0.71]), strict=True):
            for value in values:
                exp = _call(
                    expos,
                    worker,
                    "create_experiment",
                    {"direction_id": direction, "description": "d"},
                )["id"]
                args = {"experiment_id": exp, "name": "accuracy", "value": value}
                _call(expos, worker, "log_metric", args)
                group.append(exp)
        claim = {
            "claim": "a wider net scores better",
            "status": "supported",
            "metric": "accuracy",
            "a_ids": groups[0],
            "b_ids": groups[1],
            "direction": "higher",
        }
        supported = _call(expos, worker, "publish_finding", claim)["id"]
        doubted = _call(expos, worker, "publish_finding", {**claim, "direction": "lower"})["id"]
        problem = _call(
            expos,
            worker,
            "publish_finding",
            {"claim": "why does warmup diverge?", "status": "unresolved", "supersedes": doubted},
        )["id"]
        _call(expos, worker, "adopt_finding", {"finding_id": supported})
        iris = open_campaign(opened.store, TaskRef(name="iris"))
        iris_worker = CallContext("worker-2", Role.WORKER, iris.id)
        on_iris = _call(
            expos, iris_worker, "publish_finding", {"claim": "iris note", "status": "unresolved"}
        )["id"]
        revise_skill(opened.store, "sweep", "Try 3 rates.", None, **WHO)
        revise_skill(opened.store, "sweep", "Try 5 rates.", "rates = [1]", **WHO)
        revise_orientation(opened.store, "explorer", "Explore widely.", **WHO)
        revise_orientation(opened.store, "explorer", "Explore widely.", weight=1.5, **WHO)
    return {"supported": supported, "doubted": doubted, "problem": problem, "iris": on_iris}


def test_memory_lists_findings_skills_and_orientations(lab: Path, campaign_id: str) -> None:
    ids = _populate(lab, campaign_id)
    result = rsilab("memory", "--lab", lab)
    assert result.exit_code == 0, explain(result)
    out = result.stdout
    assert "open problem, not a result" in out
    lines = {name: next(line for line in out.splitlines() if i in line) for name, i in ids.items()}
    assert "supported" in lines["supported"] and "accuracy +0.1" in lines["supported"]
    assert "unresolved (claimed supported)" in lines["doubted"]
    assert ids["problem"] in lines["doubted"]  # superseded by the open problem
    assert "iris" in lines["iris"]
    assert "sweep" in out and "v2 <- v1" in out and "explorer" in out


def test_memory_json_filters_by_task(lab: Path, campaign_id: str) -> None:
    ids = _populate(lab, campaign_id)
    result = rsilab("memory", "findings", "--task", "digits", "--json", "--lab", lab)
    assert result.exit_code == 0, explain(result)
    data = json.loads(result.stdout)
    assert set(data) == {"findings"}
    by_id = {f["id"]: f for f in data["findings"]}
    assert set(by_id) == {ids["supported"], ids["doubted"], ids["problem"]}
    supported = by_id[ids["supported"]]
    assert (supported["status"], supported["adoptions"]) == ("supported", 1)
    assert supported["effect"]["low"] > 0
    doubted = by_id[ids["doubted"]]
    assert (doubted["status"], doubted["claimed_status"]) == ("unresolved", "supported")
    assert doubted["superseded_by"] == [ids["problem"]]


def test_memory_history_of_a_skill_and_an_orientation(lab: Path, campaign_id: str) -> None:
    _populate(lab, campaign_id)
    result = rsilab("memory", "skills", "--history", "sweep", "--json", "--lab", lab)
    assert result.exit_code == 0, explain(result)
    history = json.loads(result.stdout)["history"]
    assert [(h["version"], h["code"]) for h in history] == [(1, None), (2, "rates = [1]")]
    assert history[1]["parent_id"] == history[0]["id"]
    shown = rsilab("memory", "skills", "--history", "sweep", "--lab", lab)
    assert shown.exit_code == 0 and "rates = [1]" in shown.stdout  # the code, revised
    table = rsilab("memory", "orientations", "--history", "explorer", "--lab", lab)
    assert table.exit_code == 0, explain(table)
    assert "explorer: 2 versions" in table.stdout and "Explore widely." in table.stdout
    assert "weight" in table.stdout and "1.5" in table.stdout  # a review's revision: weight


def test_memory_refuses_a_history_it_cannot_show(lab: Path) -> None:
    result = rsilab("memory", "--history", "sweep", "--lab", lab)
    assert result.exit_code == 2
    assert "rsilab memory skills --history NAME" in result.stderr
    result = rsilab("memory", "skills", "--history", "nope", "--lab", lab)
    assert result.exit_code == 2 and "no skill named 'nope'" in result.stderr


def _head(lab: Path) -> tuple[int, str]:
    with Lab.open(lab) as opened:
        return opened.store.head()


def test_memory_on_an_empty_lab_only_reads(lab: Path) -> None:
    before = _head(lab)
    result = rsilab("memory", "--lab", lab)
    assert result.exit_code == 0, explain(result)
    assert "no findings yet" in result.stdout and "no skills yet" in result.stdout
    assert _head(lab) == before
