"""The built-in Main agent's step: the one next thing to do, decided from the records.

:meth:`MainAgent.step` looks at the campaign (rebuilt from the records) and at the orders in
flight, and either acts on the DAG itself (returns :data:`ACTED`), asks for an experiment
(returns an :class:`~rsilab.orchestrator.builtin.worker._agent.Order`), or has nothing to do until a
running experiment ends (returns :data:`WAIT`). The first rule that applies wins:

0. guidance a person gave (``rsilab guide``) and no planning step read yet: read it and open
   a direction on the task's knobs it names (guidance that names none is read and said to
   be beyond the built-in policy, which does not understand free text);
1. no direction yet: the first directions, one per group of knobs;
2. no experiment yet: the reference, the lineage head's own config, alone;
3. a review that spoke and is not answered yet: its advice decides (``continue``: the next
   experiment goes to that direction; ``verify``: grow a verify child; ``revise``/``branch``:
   grow that child and close the direction; ``stop``: close it);
4. a verification: conclude it when its re-runs are done, else re-run the parent's best config
   on a fresh seed;
5. a search direction due a review (:func:`~rsilab.orchestrator.builtin.reviewer._agent.review_due`)
  with nothing running, while the budget left could still pay for a verification: the Reviewer
  reviews it (rule 3 answers at the next step, before anything else can happen);
6. Main's own rules (:func:`~rsilab.orchestrator.builtin.main._rules.next_move`, verification left
  to the Reviewer) on each idle direction: stop at its share of the budget, branch on a plateau,
  revise a refuted one;
7. an experiment in the direction UCB picks among those free to run one (each running
   experiment counts as one more pull at the direction's mean), with a config proposed from
   the reference and the direction's best runs, never one tried or running.

Without Reviewers (:attr:`~rsilab.orchestrator.builtin.ablation.Ablation.REVIEWERS`) rules 3 and 5
are gone and rule 6 verifies too (Main's own rule for a gain that clears the noise floor).

``can_dispatch`` False (no free Worker or no budget) skips the rules that need one. A
direction whose verify child is open is on hold; one with experiments running is not moved,
reviewed or closed until they end, so no experiment loses its direction under it.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import replace
from typing import Literal

from pydantic import JsonValue

from rsilab.orchestrator.builtin._context import RunContext, direction_share
from rsilab.orchestrator.builtin._state import CampaignView, knobs_of
from rsilab.orchestrator.builtin.ablation import Ablation
from rsilab.orchestrator.builtin.main._moves import Moves
from rsilab.orchestrator.builtin.main._rules import DirectionStats, choose_direction, next_move
from rsilab.orchestrator.builtin.reviewer._agent import Reviewer, review_due
from rsilab.orchestrator.builtin.reviewer._conclude import Concluder
from rsilab.orchestrator.builtin.worker._agent import Order
from rsilab.orchestrator.builtin.worker._rules import config_key, propose_configs
from rsilab.orchestrator.research.guidance import mark_guidance_read, unread_guidance
from rsilab.records import Direction, DirectionState

ACTED: Literal["acted"] = "acted"
WAIT: Literal["wait"] = "wait"
Decision = Order | Literal["acted", "wait"]


class MainAgent:
    """Decides the campaign's next step (see the module docstring)."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.moves = Moves(ctx)
        self.reviewer = Reviewer(ctx)
        self.concluder = Concluder(ctx, self.reviewer, self.moves)

    def step(self, view: CampaignView, inflight: list[Order], can_dispatch: bool) -> Decision:
        """The next step; see the module docstring for the rules and their order."""
        busy = Counter(o.direction_id for o in inflight)
        if self._read_guidance():
            return ACTED
        if not view.dag.directions:
            self.moves.initial_directions()
            return ACTED
        if not view.runs:
            if inflight or not can_dispatch:
                return WAIT
            first = self._search_directions(view)[0]
            return Order(view.last_index + 1, first.id, {}, "reference: the current version")
        rules = [self._answer_review, self._verification, self._review]
        if self.ctx.without(Ablation.REVIEWERS):
            rules = [self._verification]
        for rule in rules:
            decision = rule(view, busy, inflight, can_dispatch)
            if decision is not None:
                return decision
        return self._search(view, busy, inflight, can_dispatch)

    def conclude_ready(self, view: CampaignView) -> None:
        """At the end of the budget: conclude every verification whose re-runs are done,
        then propose the best run not proposed yet (a proposal uses no experiment budget, so
        a gain found last is still judged)."""
        for d in view.dag.frontier():
            if view.is_verify(d) and len(view.runs_in(d.id)) >= self.ctx.verify_seeds:
                self.concluder.conclude(view, d)
                view = self.ctx.view()
        self.concluder.propose_best(self.ctx.view())

    # -- the rules ------------------------------------------------------------------------------

    def _read_guidance(self) -> bool:
        """Rule 0; True when guidance was read (the DAG may have changed)."""
        unread = unread_guidance(self.ctx.store, self.ctx.campaign_id)
        for guidance in unread:
            knobs = knobs_named(guidance.text, [k.name for k in self.ctx.task.search_space])
            if knobs:
                self.moves.from_guidance(guidance.text, knobs)
            else:
                self.ctx.say(
                    "direction",
                    f"guidance {guidance.id} names no knob of the task "
                    f"({', '.join(k.name for k in self.ctx.task.search_space) or 'none'}); "
                    "the built-in Main acts only on knobs it names",
                )
            mark_guidance_read(self.ctx.store, guidance, "main")
        return bool(unread)

    def _answer_review(
        self, view: CampaignView, busy: Counter[str], inflight: list[Order], can_dispatch: bool
    ) -> Decision | None:
        for d in self._search_directions(view):
            review = view.latest_review(d.id)
            if review is None or busy[d.id]:
                continue
            advice = str(review.recommendation)
            why = f"the reviewer advised {advice}"
            if advice == "continue":
                if view.experiment_since(d.id, review.created_at):
                    continue
                return self._order(view, d, inflight) if can_dispatch else WAIT
            if advice == "verify":
                if view.verify_child(d.id) is not None:
                    continue
                self.moves.verify(view, d)
            elif advice in ("revise", "branch"):
                self.moves.replace(view, d, advice, why)
            else:
                self.moves.close(d, why)
            return ACTED
        return None

    def _verification(
        self, view: CampaignView, busy: Counter[str], inflight: list[Order], can_dispatch: bool
    ) -> Decision | None:
        for v in view.dag.frontier():
            if not view.is_verify(v):
                continue
            done = len(view.runs_in(v.id))
            if done >= self.ctx.verify_seeds and not busy[v.id]:
                self.concluder.conclude(view, v)
                return ACTED
            if done + busy[v.id] < self.ctx.verify_seeds and can_dispatch:
                best = view.best(v.parents[0].parent_id)
                assert best is not None
                why = f"verify: re-run {best.experiment_id}"
                return Order(self._next_index(view, inflight), v.id, dict(best.config), why)
        return None

    def _review(
        self, view: CampaignView, busy: Counter[str], inflight: list[Order], can_dispatch: bool
    ) -> Decision | None:
        left = self.ctx.budget.experiments - len(view.runs) - len(inflight)
        if not can_dispatch or left < self.ctx.verify_seeds:
            return None  # review only when any advice can be followed (a verify takes two runs)
        for d in self._search_directions(view):
            if not busy[d.id] and review_due(view, d) and self.reviewer.review(view, d):
                return ACTED
        return None

    def _search(
        self, view: CampaignView, busy: Counter[str], inflight: list[Order], can_dispatch: bool
    ) -> Decision:
        floor = self.reviewer.noise_floor(view)
        share = direction_share(self.ctx.budget)
        verify = self.ctx.without(Ablation.REVIEWERS)  # else the Reviewer decides that
        left = self.ctx.budget.experiments - len(view.runs) - len(inflight)
        eligible: list[DirectionStats] = []
        for d in self._search_directions(view):
            stats = view.stats(d.id, floor)
            move = next_move(stats, noise_floor=floor, budget=share, verify=verify)
            if move == "verify" and left < self.ctx.verify_seeds:
                move = "continue"  # too late to pay for the re-runs: the final proposal judges it
            if move != "continue" and not busy[d.id]:
                if move == "stop":
                    self.moves.close(d, "its share of the budget is spent")
                elif move == "verify":
                    self.moves.verify(view, d)
                else:
                    self.moves.replace(view, d, move, f"stagnating: {move}")
                return ACTED
            full = stats.experiments + busy[d.id] >= share  # its share is running already
            awaits_review = not verify and busy[d.id] and review_due(view, d)
            if move == "continue" and not full and not awaits_review:
                eligible.append(_pulled(stats, busy[d.id]))
        if not can_dispatch:
            return WAIT
        if not eligible:
            if inflight:
                return WAIT
            self.moves.new_direction(view, self._last_closed(view), "branch")
            return ACTED
        chosen = choose_direction(eligible, len(view.runs) + len(inflight))
        return self._order(view, view.dag.directions[chosen], inflight)

    # -- helpers --------------------------------------------------------------------------------

    def _search_directions(self, view: CampaignView) -> list[Direction]:
        """Open search directions (not verifications), not on hold, oldest first."""
        return [d for d in view.dag.frontier() if not view.is_verify(d) and not view.on_hold(d)]

    def _last_closed(self, view: CampaignView) -> Direction | None:
        closed = [
            d
            for d in view.dag.directions.values()
            if not view.is_verify(d) and d.state != DirectionState.OPEN
        ]
        return closed[-1] if closed else None

    def _next_index(self, view: CampaignView, inflight: list[Order]) -> int:
        return max([view.last_index, *(o.n for o in inflight)]) + 1

    def _order(self, view: CampaignView, d: Direction, inflight: list[Order]) -> Order:
        """An experiment in ``d`` with a new config (see :meth:`_propose`)."""
        n = self._next_index(view, inflight)
        config = self._propose(view, d, inflight, n)
        return Order(n, d.id, config, "search")

    def _propose(
        self, view: CampaignView, d: Direction, inflight: list[Order], n: int
    ) -> dict[str, JsonValue]:
        """Knobs of ``d`` to change, bred from the reference and ``d``'s best runs; a config
        neither run nor running (else the reference's, unchanged)."""
        space = self.ctx.task.search_space
        allowed = set(knobs_of(d))
        own = [k for k in space if k.name in allowed]
        base = view.ref_config()
        ref = [r for r in view.runs if r.experiment_id in view.ref_ids]
        parents = [(r.config, r.score) for r in [*ref, *view.runs_in(d.id)] if not r.failed]
        tried = {config_key(r.config, space) for r in view.runs}
        tried |= {config_key({**base, **o.config}, space) for o in inflight}
        rng = random.Random(f"{self.ctx.seed}:exp:{n}")
        for proposal in propose_configs(own, parents, rng, 20):
            if config_key({**base, **proposal}, space) not in tried:
                return proposal
        return {}


def _pulled(stats: DirectionStats, running: int) -> DirectionStats:
    """``stats`` with each running experiment counted as a pull at the direction's mean (so
    UCB spreads parallel Workers instead of sending them all to one direction)."""
    if not running:
        return stats
    mean = stats.mean_reward() if stats.rewards else 0.5
    rewards = [*stats.rewards, *([mean] * running)]
    return replace(stats, rewards=rewards, experiments=stats.experiments + running)


def knobs_named(text: str, knobs: list[str]) -> list[str]:
    """The knobs whose names appear in ``text`` as whole words (case-insensitive; ``_`` and
    ``-`` or a space are alike), in the search space's order."""
    words = " " + re.sub(r"[^a-z0-9]+", " ", text.lower()) + " "
    return [k for k in knobs if " " + re.sub(r"[^a-z0-9]+", " ", k.lower()).strip() + " " in words]
