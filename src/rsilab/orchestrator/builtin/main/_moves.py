"""The Main agent's hands: every change to the research DAG, as Main's tool calls.

Each move is idempotent on the records (a child already grown is not grown again, a closed
direction is not closed again), so a move cut short by a crash is simply made again. Where a
move grows a child and closes the parent, the child comes first: the move's first action is
the answer to the review it follows (see :mod:`rsilab.orchestrator.research.measures`).
"""

from __future__ import annotations

import random

from rsilab.orchestrator.builtin._context import RunContext
from rsilab.orchestrator.builtin._state import CampaignView, knobs_of, knobs_plan
from rsilab.orchestrator.builtin.ablation import Ablation
from rsilab.records import Direction, DirectionState

KNOBS_PER_GROUP = 3
"""The first directions split the search space into groups of at most this many knobs."""


class Moves:
    """Creates, grows and closes directions through the Main role's tools."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def initial_directions(self) -> None:
        """One direction per group of knobs of the task's search space (one when it has none;
        one over every knob without Workers, whose directions the groups are)."""
        names = [k.name for k in self.ctx.task.search_space]
        size = max(1, -(-len(names) // KNOBS_PER_GROUP))
        if self.ctx.without(Ablation.WORKERS):
            size = max(1, len(names))
        groups = [names[i : i + size] for i in range(0, len(names), size)] or [[]]
        for group in groups:
            title = f"tune {', '.join(group)}" if group else "re-run the system"
            self._create(
                title,
                f"changing {', '.join(group) or 'nothing'} raises the dev "
                f"{self.ctx.target} score over the current version",
                knobs_plan(group, f"workers change only these knobs of {self._config}"),
                [],
            )

    def verify(self, view: CampaignView, d: Direction) -> None:
        """Grow ``d``'s verify child (re-runs of its best config on fresh seeds), then mark
        ``d`` promising while it waits for the verdict."""
        if view.verify_child(d.id) is None:
            self._create(
                f"verify {d.title}",
                f"the best config of {d.id} holds on fresh seeds",
                knobs_plan(knobs_of(d), "re-run the best config on fresh seeds"),
                [{"parent_id": d.id, "relation": "verify"}],
            )
        if d.state == DirectionState.OPEN:
            self.ctx.door.main(
                "update_direction",
                direction_id=d.id,
                status="promising",
                conclusion="a gain worth checking; verifying it on fresh seeds",
            )

    def carry_on(self, view: CampaignView, d: Direction) -> None:
        """Grow a ``continue`` child of ``d``: more of the same from the new version."""
        if view.child_with(d.id, "continue") is None:
            title = d.title
            while title.startswith("continue "):  # one "continue" says it, however deep
                title = title.removeprefix("continue ")
            self._create(
                f"continue {title}",
                f"more gains along {d.id} from the new version",
                knobs_plan(knobs_of(d), "build on the accepted version"),
                [{"parent_id": d.id, "relation": "continue"}],
            )

    def replace(self, view: CampaignView, d: Direction, relation: str, why: str) -> None:
        """Grow a ``branch`` or ``revise`` child of ``d`` on other knobs, then close ``d``
        (refuted for a revision: its hypothesis was wrong; exhausted for a branch)."""
        if view.child_with(d.id, relation) is None:
            self.new_direction(view, d, relation)
        status = DirectionState.REFUTED if relation == "revise" else DirectionState.EXHAUSTED
        self.close(d, why, status)

    def close(
        self, d: Direction, why: str, status: DirectionState = DirectionState.EXHAUSTED
    ) -> None:
        """Close ``d`` (nothing when it is closed already)."""
        if not d.state.is_finished():
            self.ctx.door.main(
                "update_direction", direction_id=d.id, status=str(status), conclusion=why
            )

    def new_direction(self, view: CampaignView, parent: Direction | None, relation: str) -> None:
        """A direction on a random group of one to three knobs (not the parent's own group),
        grown from ``parent`` with ``relation`` (a root when ``parent`` is None); on every
        knob again without Workers."""
        names = [k.name for k in self.ctx.task.search_space]
        rng = random.Random(f"{self.ctx.seed}:direction:{len(view.dag.directions)}")
        old = set(knobs_of(parent)) if parent is not None else set()
        group = names
        for _ in range(0 if self.ctx.without(Ablation.WORKERS) else 20):
            group = sorted(rng.sample(names, min(len(names), rng.randint(1, 3))), key=names.index)
            if set(group) != old:
                break
        edges = [] if parent is None else [{"parent_id": parent.id, "relation": relation}]
        self._create(
            f"{relation}: tune {', '.join(group)}",
            f"changing {', '.join(group)} raises the dev {self.ctx.target} score",
            knobs_plan(group, f"workers change only these knobs of {self._config}"),
            edges,
        )

    def from_guidance(self, text: str, knobs: list[str]) -> None:
        """A root direction on the knobs a person's guidance names, its text the hypothesis."""
        self._create(
            f"guidance: tune {', '.join(knobs)}",
            f"expert guidance: {text}"[:2000],
            knobs_plan(knobs, "follow the guidance; workers change only these knobs"),
            [],
        )

    @property
    def _config(self) -> str:
        """The harness's config file, as the plans name it."""
        return self.ctx.config_file or "the config (the harness names no config file)"

    def _create(
        self, title: str, hypothesis: str, plan: str, parents: list[dict[str, str]]
    ) -> None:
        self.ctx.door.main(
            "create_direction", title=title[:100], hypothesis=hypothesis, plan=plan, parents=parents
        )
        self.ctx.say("direction", f"direction {title[:100]!r}")
