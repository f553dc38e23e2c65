"""The agents' half of the dashboard's synthetic lab: directions, experiments, proposals.

:class:`_Research` writes, as the agents' tools write them, what the built-in policy's
agents leave in a campaign: Main's directions (roots first, then children grown from good
directions along continue, verify, branch and revise edges), the built-in Worker's
experiments in batches (their runs from :mod:`benchmarks._dashboard_runs`), reviews and
conclusions as each direction goes (:mod:`benchmarks._dashboard_evidence`), and at even
intervals a candidate proposed to the controller (:mod:`benchmarks._dashboard_controller`).
How many experiments each direction gets is drawn up front; the newest directions get none
and the newest few stay open, as in a campaign its budget cut off.
"""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np

from benchmarks._dashboard_controller import _Controller
from benchmarks._dashboard_evidence import _Node, conclude, submit_review
from benchmarks._dashboard_runs import FLAGGED, flag, run_experiment
from benchmarks._dashboard_writer import _Writer
from rsilab.orchestrator.builtin.worker._rules import config_key, propose_configs
from rsilab.records import (
    Direction,
    DirectionEdge,
    EdgeRelation,
    Experiment,
    Record,
    Role,
)
from rsilab.tasks.builtin.synthetic import true_score

WORKERS = 8
BATCH = 100
"""Experiments whose jobs and dev evaluations share one event."""
REVIEW_EVERY = 250
"""A direction is reviewed after this many new experiments and when it ends."""
ROOT_KNOBS = (("lr", "width"), ("dropout", "epochs"), ("optimizer",))
"""The built-in Main agent's first directions."""
RELATION_P = {
    EdgeRelation.CONTINUE: 0.4,
    EdgeRelation.VERIFY: 0.2,
    EdgeRelation.BRANCH: 0.25,
    EdgeRelation.REVISE: 0.15,
}
TITLES: dict[EdgeRelation | None, tuple[str, str]] = {
    None: ("tune {names}", "changing {names} raises the dev quality score"),
    EdgeRelation.CONTINUE: ("tune {names} further from #{p}", "more steps on {names} help"),
    EdgeRelation.VERIFY: ("verify #{p}'s best on fresh seeds", "#{p}'s best keeps its gain"),
    EdgeRelation.BRANCH: ("tune {names} from #{p}'s best", "{names} matter from #{p}'s best"),
    EdgeRelation.REVISE: ("revise #{p}: tune {names} again", "#{p} moved {names} the wrong way"),
}
"""(title, hypothesis) of a direction by the edge it grew along."""
TRUE_MARGIN = {"quality": 0.05, "robustness": 0.02}
"""How far a well-judged proposal's true scores lie above the head's, so that the rule's
intervals (about 0.035 either side here) show the target's gain and show the other not
falling past its tolerance."""


class _Research:
    """The agents' records, as their tools write them: directions, experiments, reviews,
    findings. The newest directions stay open, as in a campaign its budget cut off."""

    def __init__(
        self, w: _Writer, controller: _Controller, experiments: int, directions: int
    ) -> None:
        self.w, self.controller, self.rng = w, controller, w.rng
        self.search = random.Random(int(w.rng.integers(0, 2**63)))
        weights = w.rng.lognormal(0.0, 1.0, directions)
        weights[directions - min(3, directions // 10) :] = 0.0  # the newest: no experiment yet
        self.quotas = [int(n) for n in w.rng.multinomial(experiments, weights / weights.sum())]
        self.tail = directions - max(1, directions // 15)
        """Directions from this index on stay open or promising."""
        self.nodes: list[_Node] = []
        self.count = 0
        self.dev: dict[str, dict[str, float]] = {}
        self.configs: dict[str, dict[str, Any]] = {}
        self.succeeded: list[Experiment] = []
        self.proposed: set[str] = set()
        default = w.task.default_config()
        self.robust_floor = true_score(default, "base", "robustness")

    def run(self) -> None:
        """Every direction in order: open it, run its experiments in batches (reviewed as
        they go), conclude it; a candidate is proposed at even intervals."""
        total = len(self.quotas)
        proposals = max(2, total // 10)
        at = {(k + 1) * total // (proposals + 1) for k in range(proposals)}
        for index, quota in enumerate(self.quotas):
            node = self.open(index)
            while len(node.exps) < quota:
                self.batch(node, min(BATCH, quota - len(node.exps)))
                if len(node.exps) - node.reviewed >= REVIEW_EVERY:
                    self.review(node)
            if len(node.exps) > node.reviewed:
                self.review(node)
            conclude(self.w, node, open_ended=index >= self.tail)
            if index in at:
                self.propose()

    # --- directions -----------------------------------------------------------------------

    def best(self, node: _Node) -> Experiment | None:
        """The direction's experiment with the best dev quality."""
        done = [e for e in node.exps if e.id in self.dev]
        return max(done, key=lambda e: self.dev[e.id]["quality"], default=None)

    def open(self, index: int) -> _Node:
        """``create_direction`` by Main: the roots first, then children of good directions."""
        grown = [n for n in self.nodes if self.best(n) is not None]
        if index < len(ROOT_KNOBS) or not grown:
            knobs = ROOT_KNOBS[index % len(ROOT_KNOBS)]
            node = self._node(index, knobs, self.w.task.default_config(), [], None)
        else:
            node = self._child(index, grown)
        d = node.direction
        parents = [e.model_dump(mode="json") for e in d.parents]
        args = {"title": d.title, "hypothesis": d.hypothesis, "plan": d.plan, "parents": parents}
        self.w.tool_call("main", Role.MAIN, "create_direction", args, [d])
        self.nodes.append(node)
        return node

    def _child(self, index: int, grown: list[_Node]) -> _Node:
        """A direction grown from a good one (the better, the likelier), along a drawn edge."""
        bests = [self.best(n) for n in grown]
        quality = np.array([self.dev[b.id]["quality"] for b in bests if b is not None])
        weights = np.exp(20.0 * (quality - quality.max()))
        pick = int(self.rng.choice(len(grown), p=weights / weights.sum()))
        parent, best = grown[pick], bests[pick]
        assert best is not None
        relations = list(RELATION_P)
        relation = relations[int(self.rng.choice(len(relations), p=list(RELATION_P.values())))]
        knobs = parent.knobs
        if relation is EdgeRelation.BRANCH:
            names = [k.name for k in self.w.task.search_space]
            drawn = self.rng.choice(names, int(self.rng.integers(1, 3)), replace=False)
            knobs = tuple(sorted(str(k) for k in drawn))
        # workers start from the head version's config, carrying over what the parent
        # direction found for its knobs (a revise starts them over; a verify re-runs its best)
        base = dict(self.controller.head_config)
        if relation is EdgeRelation.VERIFY:
            base = dict(self.configs[best.id])
        elif relation is not EdgeRelation.REVISE:
            base |= {k: self.configs[best.id][k] for k in parent.knobs}
        edges = [DirectionEdge(parent_id=parent.direction.id, relation=relation)]
        other = grown[int(self.rng.integers(len(grown)))]
        if relation is EdgeRelation.BRANCH and other is not parent and self.rng.random() < 0.15:
            edges.append(DirectionEdge(parent_id=other.direction.id, relation=relation))
        return self._node(index, knobs, base, edges, relation, parent.number)

    def _node(
        self,
        index: int,
        knobs: tuple[str, ...],
        base: dict[str, Any],
        edges: list[DirectionEdge],
        relation: EdgeRelation | None,
        parent: int = 0,
    ) -> _Node:
        names = ", ".join(knobs)
        title, hypothesis = (t.format(names=names, p=parent) for t in TITLES[relation])
        direction = Direction(
            campaign_id=self.w.campaign_id,
            title=title,
            hypothesis=hypothesis,
            plan=f"workers change only these knobs of config.json\nknobs: {names}",
            parents=edges,
            created_by="main",
        )
        return _Node(direction, index + 1, knobs, dict(base), relation)

    # --- experiments ----------------------------------------------------------------------

    def plan(self, node: _Node, count: int) -> list[tuple[dict[str, Any], str]]:
        """(config, what it does) of the next ``count`` experiments: two reference runs to
        open a root, then the built-in Worker's proposals over the direction's knobs; re-runs
        of the start once those run out, and always in a verify direction."""
        out: list[tuple[dict[str, Any], str]] = []
        if node.relation is None and not node.exps:
            out += [(dict(node.base), "reference: the current version: {}")] * min(2, count)
        if node.relation is not EdgeRelation.VERIFY:
            space = [k for k in self.w.task.search_space if k.name in node.knobs]
            runs = [e for e in node.exps if e.id in self.dev]
            parents = [(self.configs[e.id], self.dev[e.id]["quality"]) for e in runs]
            tried = {config_key(self.configs[e.id], space) for e in node.exps}
            found = propose_configs(space, parents, self.search, count - len(out), tried=tried)
            out += [({**node.base, **c}, f"search: {json.dumps(c)}") for c in found]
        return out + [(dict(node.base), "re-run on a fresh seed")] * (count - len(out))

    def batch(self, node: _Node, count: int) -> None:
        """``create_experiment`` for ``count`` experiments, their jobs and dev evaluations in
        one event, then ``finish_experiment`` for each."""
        created: list[Experiment] = []
        best = self.best(node)
        for config, what in self.plan(node, count):
            self.count += 1
            worker = f"worker-{int(self.rng.integers(1, WORKERS + 1))}"
            exp = Experiment(
                campaign_id=self.w.campaign_id,
                direction_id=node.direction.id,
                description=f"[exp:{self.count}] {what}",
                config=config,
                parent_experiment_id=best.id if best is not None else None,
                workspace_hash=self.w.tree(config),
                created_by=worker,
            )
            args = {"direction_id": node.direction.id, "description": what, "config": config}
            self.w.tool_call(worker, Role.WORKER, "create_experiment", args, [exp])
            self.configs[exp.id] = config
            if self.rng.random() < FLAGGED:
                flag(self.w, worker)
            created.append(exp)
        runs = [self.execute(exp) for exp in created]
        writes: list[Record] = [r for records, _ in runs for r in records]
        detail = f"jobs and dev evaluations of {len(created)} experiments"
        self.w.commit("jobs_finished", writes, actor="orchestrator", detail=detail)
        for _, done in runs:
            args = {
                "experiment_id": done.id,
                "status": str(done.state),
                "summary": done.summary_text,
            }
            self.w.tool_call(done.created_by, Role.WORKER, "finish_experiment", args, [done])
            node.exps.append(done)
            if done.id in self.dev:
                self.succeeded.append(done)

    def execute(self, exp: Experiment) -> tuple[list[Record], Experiment]:
        """The records of ``exp``'s run and ``exp`` finished; its dev scores kept when it
        has them."""
        records, done, scores = run_experiment(self.w, exp, self.configs[exp.id])
        if scores is not None:
            self.dev[exp.id] = scores
        return records, done

    # --- evidence -------------------------------------------------------------------------

    def review(self, node: _Node) -> None:
        submit_review(self.w, node, self.nodes, self.dev)

    def propose(self) -> None:
        """A Worker proposes an experiment not proposed yet; the controller judges it.

        Proposals alternate between two judgments. The odd ones take a config that truly
        beats the head on every benchmark (synthetic's truth), as a worker who judged well
        would, so some are accepted; the even ones, and odd ones that find none, take the
        best dev quality whose dev robustness stays at the start's, as a worker who trusts
        one dev run would: mostly lucky draws the controller turns down.
        """
        head = self.controller.head_config
        fresh = [e for e in self.succeeded if e.id not in self.proposed]
        chosen = None
        if len(self.controller.candidates) % 2 == 0:
            chosen = self._truly_better(fresh, head)
        if chosen is None:
            fit = [e for e in fresh if self.dev[e.id]["robustness"] >= self.robust_floor]
            chosen = max(fit, key=lambda e: self.dev[e.id]["quality"], default=None)
        if chosen is not None:
            self.proposed.add(chosen.id)
            self.controller.judge(chosen, self.configs[chosen.id])

    def _truly_better(self, fresh: list[Experiment], head: dict[str, Any]) -> Experiment | None:
        """The experiment of truly best quality among those that beat the head on both
        benchmarks by :data:`TRUE_MARGIN`; None when there is none."""
        truth = {
            e.id: {b: true_score(self.configs[e.id], "base", b) for b in self.w.benches}
            for e in fresh
        }
        floor = {b: true_score(head, "base", b) + TRUE_MARGIN[b] for b in self.w.benches}
        fit = [e for e in fresh if all(truth[e.id][b] >= floor[b] for b in floor)]
        return max(fit, key=lambda e: truth[e.id]["quality"], default=None)
