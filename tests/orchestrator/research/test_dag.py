"""The research DAG read model, over a small campaign built through the tools."""

from __future__ import annotations

import json

from rsilab.orchestrator import DagEdge, ResearchDag
from rsilab.records import Direction, EdgeRelation, Role
from tests.expos.helpers import Bench


def _edge(parent: str, relation: str) -> dict[str, str]:
    return {"parent_id": parent, "relation": relation}


def _campaign(bench: Bench) -> dict[str, str]:
    """root -> (continue) deeper -> (verify) rerun; root -> (branch) side; side+deeper -> merged."""
    root = bench.direction("root")
    deeper = bench.direction("deeper", parents=[_edge(root, "continue")])
    side = bench.direction("side", parents=[_edge(root, "branch")])
    rerun = bench.direction("rerun", parents=[_edge(deeper, "verify")])
    merged = bench.direction("merged", parents=[_edge(side, "revise"), _edge(deeper, "branch")])
    exps = [bench.experiment(root), bench.experiment(root), bench.experiment(deeper)]
    bench.ok(Role.REVIEWER, "submit_review", {"experiment_ids": exps[:2], "verdict": "supports"})
    bench.ok(Role.REVIEWER, "submit_review", {"experiment_ids": [exps[2]], "direction_id": side})
    bench.ok(Role.MAIN, "update_direction", {"direction_id": deeper, "status": "promising"})
    bench.ok(Role.MAIN, "update_direction", {"direction_id": side, "status": "promising"})
    bench.ok(Role.MAIN, "update_direction", {"direction_id": merged, "status": "exhausted"})
    return {"root": root, "deeper": deeper, "side": side, "rerun": rerun, "merged": merged}


def _titles(directions: list[Direction]) -> list[str]:
    return [d.title for d in directions]


def test_load_indexes_the_campaign(any_bench: Bench) -> None:
    ids = _campaign(any_bench)
    other = any_bench.ctx(Role.MAIN, campaign_id=any_bench.other_campaign().id)
    any_bench.ok(other, "create_direction", {"title": "theirs", "hypothesis": "h"})
    dag = ResearchDag.load(any_bench.store, any_bench.campaign.id)
    assert list(dag.directions) == list(ids.values())
    assert DagEdge(ids["deeper"], ids["rerun"], EdgeRelation.VERIFY) in dag.edges
    assert len(dag.edges) == 5
    assert [len(dag.experiments[i]) for i in ids.values()] == [2, 1, 0, 0, 0]
    # The first review names no direction: it belongs to its experiments' direction. The
    # second names one, which wins over the experiments it read.
    assert [len(dag.reviews[i]) for i in ids.values()] == [1, 0, 1, 0, 0]


def test_navigation(any_bench: Bench) -> None:
    ids = _campaign(any_bench)
    dag = ResearchDag.load(any_bench.store, any_bench.campaign.id)
    assert _titles(dag.children(ids["root"])) == ["deeper", "side"]
    assert _titles(dag.children(ids["deeper"])) == ["rerun", "merged"]
    assert _titles(dag.parents(ids["merged"])) == ["side", "deeper"]
    assert _titles(dag.ancestors(ids["merged"])) == ["side", "deeper", "root"]
    assert dag.ancestors(ids["root"]) == [] and dag.children(ids["rerun"]) == []
    assert _titles(dag.roots()) == ["root"]
    assert _titles(dag.frontier()) == ["root", "deeper", "side", "rerun"]
    assert _titles(dag.needs_verification()) == ["side"]  # deeper has its verify child


def test_to_json_and_render_text(any_bench: Bench) -> None:
    ids = _campaign(any_bench)
    dag = ResearchDag.load(any_bench.store, any_bench.campaign.id)
    data = json.loads(json.dumps(dag.to_json()))
    assert data["campaign_id"] == any_bench.campaign.id
    root = data["directions"][0]
    assert (root["title"], root["state"], root["experiments"], root["reviews"]) == (
        "root",
        "open",
        2,
        1,
    )
    assert {"parent_id": ids["side"], "child_id": ids["merged"], "relation": "revise"} in data[
        "edges"
    ]
    lines = dag.render_text().splitlines()
    assert lines[0] == f"{ids['root']} 'root' [open] exps=2 reviews=1"
    assert lines[1] == f"  continue: {ids['deeper']} 'deeper' [promising] exps=1 reviews=0"
    assert lines[2].startswith(f"    verify: {ids['rerun']} 'rerun' [open]")
    assert lines[3].startswith(f"    branch: {ids['merged']} 'merged' [exhausted]")
    assert lines[4].startswith(f"  branch: {ids['side']} 'side' [promising]")
    assert lines[5] == f"    revise: see {ids['merged']}"
    assert len(lines) == 6


def test_an_empty_campaign(any_bench: Bench) -> None:
    dag = ResearchDag.load(any_bench.store, any_bench.campaign.id)
    assert dag.directions == {} and dag.edges == [] and dag.frontier() == []
    assert dag.render_text() == ""
    assert dag.to_json() == {"campaign_id": any_bench.campaign.id, "directions": [], "edges": []}
