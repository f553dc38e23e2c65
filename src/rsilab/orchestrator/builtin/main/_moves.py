"""The Main agent's hands: every change to the research DAG, as Main's tool calls.

Each move is idempotent on the records (a child already grown is not grown again, a closed
direction is not closed again), so a move cut short by a crash is simply made again. Where a
move grows a child and closes the parent, the child comes first: the move's first action is
the answer to the review it follows (see :mod:`rsilab.orchestrator.research.measures`).
"""

from __future__ import annotations

from rsilab.orchestrator.builtin._context import RunContext
from rsilab.orchestrator.builtin._search import build_study, importance
from rsilab.orchestrator.builtin._state import (
    CampaignView,
    Run,
    base_of,
    base_plan,
    knobs_of,
    knobs_plan,
)
from rsilab.orchestrator.builtin.ablation import Ablation
from rsilab.records import Direction, DirectionState
from rsilab.tasks import with_deciding

RACE_TITLE = "race the best configs"
"""The title of the race direction (:mod:`rsilab.orchestrator.builtin.main._race`)."""
TEMPER_TITLE = "temper "
"""How a tempering direction's title begins (:mod:`rsilab.orchestrator.builtin.main._temper`);
the rest names the experiment it tempers."""


class Moves:
    """Creates, grows and closes directions through the Main role's tools."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def initial_directions(self) -> None:
        """The first direction: every knob of the task's search space at once, from the
        reference (the sampler models them jointly); "re-run the system" when it has none."""
        names = [k.name for k in self.ctx.space]
        title = f"tune {', '.join(names)}" if names else "re-run the system"
        self._create(
            title,
            f"changing {', '.join(names) or 'nothing'} {self.ctx.improves} the dev "
            f"{self.ctx.target} score over the current version",
            knobs_plan(names, f"workers change only these knobs of {self._config}"),
            [],
        )

    @staticmethod
    def is_race(d: Direction) -> bool:
        """True for the race direction (re-runs of the best configs at the end)."""
        return d.title == RACE_TITLE

    @staticmethod
    def is_temper(d: Direction) -> bool:
        """True for a tempering direction (bisection from an infeasible gain back toward the
        reference)."""
        return d.title.startswith(TEMPER_TITLE)

    def temper(self, source: Run, names: list[str]) -> None:
        """Open a root direction that tempers ``source`` (an infeasible run with a large gain)
        toward the reference on the numeric knobs ``names``; its plan starts from
        ``source``."""
        self._create(
            f"{TEMPER_TITLE}{source.experiment_id} toward the reference",
            f"part of the way from the reference to {source.experiment_id} (direction "
            f"{source.direction_id}) keeps part of its dev {self.ctx.target} gain without its "
            "non-target regression",
            base_plan(
                source.experiment_id,
                knobs_plan(names, "bisect between the reference and this config"),
            ),
            [],
        )

    def race(self, view: CampaignView) -> None:
        """Grow the race direction from the direction of the best run (a verify edge: its
        re-runs verify that direction's gain), once."""
        if any(self.is_race(d) for d in view.dag.directions.values()):
            return
        ref = set(view.ref_ids)
        runs = [r for r in view.runs if not r.failed and r.experiment_id not in ref]
        best = max(runs, key=lambda r: (r.score, -r.index)) if runs else None
        edges = [] if best is None else [{"parent_id": best.direction_id, "relation": "verify"}]
        self._create(
            RACE_TITLE,
            "the best configs' dev gains hold on re-runs; successive halving keeps the best",
            knobs_plan([], "re-run the reference once, then the best configs, halving the field"),
            edges,
        )

    def subsets(self, view: CampaignView) -> list[list[str]]:
        """Knob groups a new direction may open, in order of preference: the most important
        knobs by the campaign's study (up to half the space, at most three), every knob, the
        less important rest, then each knob alone. Without Workers: every knob only."""
        names = [k.name for k in self.ctx.space]
        if self.ctx.without(Ablation.WORKERS) or len(names) <= 1:
            return [names]
        study = build_study(self.ctx.space, view.runs, seed=self.ctx.seed)
        ranked = importance(study, self.ctx.space)
        k = max(1, min(3, len(names) // 2))
        ordered = [ranked[:k], names, ranked[k:], *([n] for n in ranked)]
        out: list[list[str]] = []
        for group in ordered:
            group = sorted(group, key=names.index)
            if group and group not in out:
                out.append(group)
        return out

    def next_direction(self, view: CampaignView, parent: Direction | None, relation: str) -> bool:
        """Open a direction from the best config found anywhere (the reference when nothing
        beats it) on the first knob group of :meth:`subsets` not yet opened from that config
        (with the knobs that decide any of its knobs that do not act in that config:
        :func:`~rsilab.tasks.with_deciding`), grown from ``parent`` with ``relation`` (a root
        when ``parent`` is None). False when every group was opened from it already (nothing
        new to open)."""
        ref = set(view.ref_ids)
        runs = [r for r in view.runs if not r.failed and r.experiment_id not in ref]
        best = max(runs, key=lambda r: (r.score, -r.index)) if runs else None
        if best is not None and view.ref_score is not None and best.score <= view.ref_score:
            best = None
        source = best.experiment_id if best is not None else None
        opened = {
            (tuple(knobs_of(d)), base_of(d))
            for d in view.dag.directions.values()
            if not self.is_race(d) and not self.is_temper(d) and not view.is_verify(d)
        }
        config = best.config if best is not None else view.ref_config()
        for subset in self.subsets(view):
            # a knob that does not act from this start (a learning rate where nothing trains)
            # opens with the knobs that decide it, or its draws would all run the start again
            group = with_deciding(subset, config, self.ctx.space)
            if (tuple(group), source) in opened:
                continue
            edges = [] if parent is None else [{"parent_id": parent.id, "relation": relation}]
            start = f"the best config so far ({source})" if source else "the reference"
            plan = knobs_plan(group, f"workers change only these knobs of {self._config}")
            self._create(
                f"{relation}: tune {', '.join(group)}",
                f"changing {', '.join(group)} from {start} {self.ctx.improves} the dev "
                f"{self.ctx.target} score",
                base_plan(source, plan) if source else plan,
                edges,
            )
            return True
        return False

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

    def reopen(self, view: CampaignView, parent: Direction | None) -> bool:
        """Open every knob again from the best config found anywhere, unless a direction on
        every knob was closed as exhausted (its draws found no new config): then the space is
        used up and this returns False."""
        names = [k.name for k in self.ctx.space]
        for d in view.dag.directions.values():
            last = d.history[-1].conclusion if d.history else None
            if knobs_of(d) == names and last is not None and last.startswith("exhausted"):
                return False
        edges = [] if parent is None else [{"parent_id": parent.id, "relation": "branch"}]
        self._create(
            f"branch: tune {', '.join(names)}",
            f"changing {', '.join(names)} {self.ctx.improves} the dev {self.ctx.target} score",
            knobs_plan(names, f"workers change only these knobs of {self._config}"),
            edges,
        )
        return True

    def replace(self, view: CampaignView, d: Direction, relation: str, why: str) -> bool:
        """Grow a ``branch`` or ``revise`` child of ``d`` from the best config found anywhere
        (:meth:`next_direction`), then close ``d`` (refuted for a revision: its hypothesis was
        wrong; exhausted for a branch). False, and ``d`` left open, when there is no new
        direction to grow."""
        if view.child_with(d.id, relation) is None and not self.next_direction(view, d, relation):
            return False
        status = DirectionState.REFUTED if relation == "revise" else DirectionState.EXHAUSTED
        self.close(d, why, status)
        return True

    def close(
        self, d: Direction, why: str, status: DirectionState = DirectionState.EXHAUSTED
    ) -> None:
        """Close ``d`` (nothing when it is closed already)."""
        if not d.state.is_finished():
            self.ctx.door.main(
                "update_direction", direction_id=d.id, status=str(status), conclusion=why
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
