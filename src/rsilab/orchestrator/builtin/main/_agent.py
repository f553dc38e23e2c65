"""The built-in Main agent's step: the one next thing to do, decided from the records.

:meth:`MainAgent.step` looks at the campaign (rebuilt from the records) and at the orders in
flight, and either acts on the DAG itself (returns :data:`ACTED`), asks for an experiment
(returns an :class:`~rsilab.orchestrator.builtin.worker._agent.Order`), has nothing to do until a
running experiment ends (returns :data:`WAIT`), or finds nothing new left to try (returns
:data:`EXHAUSTED`: every direction it could open is closed and none can produce a new config).
The first rule that applies wins:

0. guidance a person gave (``rsilab guide``) and no planning step read yet: read it and open
   a direction on the task's knobs it names (guidance that names none is read and said to
   be beyond the built-in policy, which does not understand free text);
1. no direction yet: the first direction, over every knob, from the reference;
2. no experiment yet: the reference, the lineage head's own config, alone;
3. the race (:mod:`~rsilab.orchestrator.builtin.main._race`) once the search has used its share
   of the budget: grow the race direction, then re-run the reference once and the best configs
   by successive halving (a race with nothing to race leaves the budget to the search);
4. a review that spoke and is not answered yet: its advice decides (``continue``: the next
   experiment goes to that direction; ``revise``/``branch``: open a direction from the best config
   found anywhere and close this one; ``stop``: close it);
5. a search direction due a review
   (:func:`~rsilab.orchestrator.builtin.reviewer._agent.review_due`) with nothing running: the
   Reviewer reviews it (rule 4 answers at the next step, before anything else can happen);
5a. tempering (:mod:`~rsilab.orchestrator.builtin.main._temper`): an open tempering direction
   takes its next bisection step, one at a time, or closes when its steps are done; else a run
   whose dev gain is large but breaks a non-target opens one, while tempering has used less
   than its share of the budget (not without tempering,
   :attr:`~rsilab.orchestrator.builtin.ablation.Ablation.TEMPERING`);
6. Main's own rules (:func:`~rsilab.orchestrator.builtin.main._rules.next_move`, without
   verification: the race verifies) on each idle direction: stop at its share of the budget,
   branch from the best on a plateau, revise a refuted one;
7. an experiment in the direction UCB picks among those free to run one (each running
   experiment counts as one more pull at the direction's mean), its config drawn by the
   campaign's TPE study (:mod:`~rsilab.orchestrator.builtin._search`) over the direction's open
   knobs, the others at the direction's base config; never one tried or running. A direction
   whose draws find no new config is exhausted and closed (the reference is never re-run to
   fill the slot); with no direction left, Main opens one from the best config found anywhere
   (:meth:`~rsilab.orchestrator.builtin.main._moves.Moves.next_direction`), or, when every one it
   could open was opened, returns :data:`EXHAUSTED`.

Without Reviewers (:attr:`~rsilab.orchestrator.builtin.ablation.Ablation.REVIEWERS`) rules 4 and 5
are gone. ``can_dispatch`` False (no free Worker or no budget) skips the rules that need one. A
direction with experiments running is not moved, reviewed or closed until they end, so no
experiment loses its direction under it.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from typing import Literal

from pydantic import JsonValue

from rsilab.orchestrator.builtin._context import RunContext, direction_share
from rsilab.orchestrator.builtin._search import build_study, sampler_seed, suggest
from rsilab.orchestrator.builtin._seeds import next_seed
from rsilab.orchestrator.builtin._state import CampaignView, base_of, knobs_of
from rsilab.orchestrator.builtin.ablation import Ablation
from rsilab.orchestrator.builtin.main._moves import Moves
from rsilab.orchestrator.builtin.main._race import next_race_config, race_budget
from rsilab.orchestrator.builtin.main._rules import DirectionStats, choose_direction, next_move
from rsilab.orchestrator.builtin.main._temper import (
    TEMPER_SHARE,
    TEMPER_STEPS,
    conclusion,
    has_weak_line,
    next_temper_config,
    numeric,
    temper_source,
)
from rsilab.orchestrator.builtin.reviewer._agent import Reviewer, review_due
from rsilab.orchestrator.builtin.reviewer._conclude import Concluder
from rsilab.orchestrator.builtin.worker._agent import Order
from rsilab.orchestrator.builtin.worker._rules import config_key
from rsilab.orchestrator.research.guidance import mark_guidance_read, unread_guidance
from rsilab.records import Direction

ACTED: Literal["acted"] = "acted"
WAIT: Literal["wait"] = "wait"
EXHAUSTED: Literal["exhausted"] = "exhausted"
Decision = Order | Literal["acted", "wait", "exhausted"]
RACE_WHY = "race: re-run"
"""How a race re-run's order starts (the rest names the config's first experiment)."""


class MainAgent:
    """Decides the campaign's next step (see the module docstring)."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.moves = Moves(ctx)
        self.reviewer = Reviewer(ctx)
        self.concluder = Concluder(ctx, self.reviewer, self.moves)

    def step(self, view: CampaignView, inflight: list[Order], can_dispatch: bool) -> Decision:
        """The next step; see the module docstring for the rules and their order. An order
        comes with its seed: the next of the campaign's run seeds its config has not taken
        (common random numbers, :mod:`~rsilab.orchestrator.builtin._seeds`)."""
        decision = self._step(view, inflight, can_dispatch)
        if not isinstance(decision, Order):
            return decision
        ref = view.ref_config()
        running = [({**ref, **o.config}, o.seed) for o in inflight]
        seed = next_seed(self.ctx.seed, {**ref, **decision.config}, view.runs, running)
        return replace(decision, seed=seed)

    def _step(self, view: CampaignView, inflight: list[Order], can_dispatch: bool) -> Decision:
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
        rules = [self._race, self._answer_review, self._review, self._temper]
        if self.ctx.without(Ablation.REVIEWERS):
            rules = [self._race, self._temper]
        for rule in rules:
            decision = rule(view, busy, inflight, can_dispatch)
            if decision is not None:
                return decision
        return self._search(view, busy, inflight, can_dispatch)

    def conclude_ready(self, view: CampaignView) -> None:
        """At the end of the budget (or of what there is to try): close what is open and put
        the race's winner to the controller once, if the Reviewer predicts it is accepted
        (:meth:`~rsilab.orchestrator.builtin.reviewer._conclude.Concluder.propose_winner`)."""
        self.concluder.propose_winner(view)
        for d in self.ctx.view().dag.frontier():
            self.moves.close(d, "the campaign's budget is spent")

    # -- the rules ------------------------------------------------------------------------------

    def _read_guidance(self) -> bool:
        """Rule 0; True when guidance was read (the DAG may have changed)."""
        unread = unread_guidance(self.ctx.store, self.ctx.campaign_id)
        for guidance in unread:
            knobs = knobs_named(guidance.text, [k.name for k in self.ctx.space])
            if knobs:
                self.moves.from_guidance(guidance.text, knobs)
            else:
                self.ctx.say(
                    "direction",
                    f"guidance {guidance.id} names no knob of the task "
                    f"({', '.join(k.name for k in self.ctx.space) or 'none'}); "
                    "the built-in Main acts only on knobs it names",
                )
            mark_guidance_read(self.ctx.store, guidance, "main")
        return bool(unread)

    def race_slots(self) -> int:
        """Experiments the race keeps at the end of the budget."""
        return race_budget(self.ctx.budget.experiments) if self.ctx.searchable else 0

    def _race(
        self,
        view: CampaignView,
        busy: Counter[str],
        inflight: list[Order],
        can_dispatch: bool,
        early: bool = False,
    ) -> Decision | None:
        """Rule 3: once the search has used its share, the race's next re-run. With ``early``
        (the search is exhausted before that: a small space, such as a few code variants),
        the race begins now and takes every experiment left. Once begun, its slots are the
        re-runs it has made plus the budget left, so the rule reads the same from the records
        whenever the race began."""
        used = len(view.runs) + len(inflight)
        left = self.ctx.budget.experiments - used
        race = self._race_direction(view)
        if not self.ctx.searchable or left <= 0:
            return None
        if race is None:
            slots = self.race_slots()
            if not early and (not slots or used < self.ctx.budget.experiments - slots):
                return None
            slot, slots = 0, left if early else slots
        else:
            slot = len(view.runs_in(race.id)) + sum(o.direction_id == race.id for o in inflight)
            slots = slot + left
        raced = [o.config for o in inflight if o.direction_id == (race.id if race else "")]
        config = next_race_config(
            view.runs, view.ref_config(), raced, slot, slots, view.non_targets
        )
        if config is None:
            return None  # nothing beats the reference: the search goes on
        if race is None:
            self.moves.race(view)
            return ACTED
        if not can_dispatch:
            return WAIT
        first = next(r for r in view.runs if r.config == config)
        return Order(
            self._next_index(view, inflight), race.id, config, f"{RACE_WHY} {first.experiment_id}"
        )

    def _temper(
        self, view: CampaignView, busy: Counter[str], inflight: list[Order], can_dispatch: bool
    ) -> Decision | None:
        """Rule 5a: tempering (:mod:`~rsilab.orchestrator.builtin.main._temper`). An open
        tempering direction takes its next bisection step (one at a time), or is closed once
        its steps are done; without one, a source worth tempering opens one while tempering
        has used less than its share of the budget. None: nothing to temper now."""
        if self.ctx.without(Ablation.TEMPERING):
            return None
        space = self.ctx.space
        tempering = [d for d in view.dag.directions.values() if self.moves.is_temper(d)]
        for d in tempering:
            if d.state.is_finished() or busy[d.id]:
                continue
            steps = view.runs_in(d.id)
            far = next((r for r in view.runs if r.experiment_id == base_of(d)), None)
            if far is None:  # a plan naming no run of this campaign: nothing to temper
                self.moves.close(d, "tempered: its source is not a run of this campaign")
                return ACTED
            far = replace(far, config={**view.ref_config(), **far.config})
            tried = {config_key(r.config, space) for r in view.runs}
            tried |= {config_key(o.config, space) for o in inflight}
            config = next_temper_config(space, view.ref_config(), far, steps, tried)
            if config is None:
                self.moves.close(
                    d,
                    conclusion(
                        steps,
                        far,
                        lambda r: (
                            f"{r.experiment_id} is feasible at dev {self.ctx.target} "
                            f"{view.raw(r.score):.4g}"
                        ),
                        has_weak_line(space, view.ref_config(), far.config),
                    ),
                )
                return ACTED
            if not can_dispatch:
                return None
            n = self._next_index(view, inflight)
            return Order(n, d.id, {k.name: config[k.name] for k in space}, "temper")
        if any(not d.state.is_finished() for d in tempering) or view.ref_score is None:
            return None
        used = sum(len(view.runs_in(d.id)) for d in tempering)
        names = [k.name for k in numeric(space)]
        if not names or used + TEMPER_STEPS > TEMPER_SHARE * self.ctx.budget.experiments:
            return None
        floor = self.reviewer.noise_floor(view)
        source = temper_source(
            view.runs,
            view.ref_ids,
            view.ref_score,
            floor,
            {base_of(d) or "" for d in tempering},
            lambda run: self.reviewer.gain_is_clear(view, run, floor),
            steps={r.experiment_id for d in tempering for r in view.runs_in(d.id)},
        )
        if source is None:
            return None
        self.moves.temper(source, names)
        return ACTED

    def _race_direction(self, view: CampaignView) -> Direction | None:
        for d in view.dag.directions.values():
            if self.moves.is_race(d):
                return d
        return None

    def _answer_review(
        self, view: CampaignView, busy: Counter[str], inflight: list[Order], can_dispatch: bool
    ) -> Decision | None:
        for d in self._search_directions(view):
            review = view.latest_review(d.id)
            if review is None or busy[d.id]:
                continue
            advice = str(review.recommendation)
            why = f"the reviewer advised {advice}"
            if advice in ("continue", "verify"):  # verify: the race at the end re-runs it
                if view.experiment_since(d.id, review.created_at):
                    continue
                return self._order(view, d, inflight) if can_dispatch else WAIT
            if advice in ("revise", "branch"):
                if not self.moves.replace(view, d, advice, why):
                    self.moves.close(d, f"{why}; every direction it could open was tried")
            else:
                self.moves.close(d, why)
            return ACTED
        return None

    def _review(
        self, view: CampaignView, busy: Counter[str], inflight: list[Order], can_dispatch: bool
    ) -> Decision | None:
        if not can_dispatch:
            return None  # review only when the advice can be followed
        for d in self._search_directions(view):
            if not busy[d.id] and review_due(view, d) and self.reviewer.review(view, d):
                return ACTED
        return None

    def _search(
        self, view: CampaignView, busy: Counter[str], inflight: list[Order], can_dispatch: bool
    ) -> Decision:
        floor = self.reviewer.noise_floor(view)
        share = direction_share(self.ctx.budget)
        eligible: list[DirectionStats] = []
        for d in self._search_directions(view):
            stats = view.stats(d.id, floor)
            move = next_move(stats, noise_floor=floor, budget=share, verify=False)
            if move != "continue" and not busy[d.id]:
                if move == "stop":
                    self.moves.close(d, "its share of the budget is spent")
                elif not self.moves.replace(view, d, move, f"stagnating: {move}"):
                    self.moves.close(d, "stagnating; every direction it could open was tried")
                return ACTED
            full = stats.experiments + busy[d.id] >= share  # its share is running already
            awaits_review = (
                not self.ctx.without(Ablation.REVIEWERS) and busy[d.id] and review_due(view, d)
            )
            if move == "continue" and not full and not awaits_review:
                eligible.append(_pulled(stats, busy[d.id]))
        if not can_dispatch:
            return WAIT
        if not eligible:
            if inflight:
                return WAIT
            if self.moves.next_direction(view, self._last_closed(view), "branch"):
                return ACTED
            if self.moves.reopen(view, self._last_closed(view)):
                return ACTED
            # nothing new to try and budget left: race the best configs with all of it
            return self._race(view, busy, inflight, can_dispatch, early=True) or EXHAUSTED
        chosen = view.dag.directions[choose_direction(eligible, len(view.runs) + len(inflight))]
        config = self._propose(view, chosen, inflight, self._next_index(view, inflight))
        if config is None:
            if busy[chosen.id]:
                return WAIT
            self.moves.close(chosen, "exhausted: its knobs give no config not tried yet")
            return ACTED
        return Order(self._next_index(view, inflight), chosen.id, config, "search")

    # -- helpers --------------------------------------------------------------------------------

    def _search_directions(self, view: CampaignView) -> list[Direction]:
        """Open search directions (not verifications nor the race), oldest first."""
        return [
            d
            for d in view.dag.frontier()
            if not view.is_verify(d)
            and not view.on_hold(d)
            and not self.moves.is_race(d)
            and not self.moves.is_temper(d)
        ]

    def _last_closed(self, view: CampaignView) -> Direction | None:
        closed = [
            d
            for d in view.dag.directions.values()
            if not view.is_verify(d)
            and not self.moves.is_race(d)
            and not self.moves.is_temper(d)
            and d.state.is_finished()
        ]
        return closed[-1] if closed else None

    def _next_index(self, view: CampaignView, inflight: list[Order]) -> int:
        return max([view.last_index, *(o.n for o in inflight)]) + 1

    def _order(self, view: CampaignView, d: Direction, inflight: list[Order]) -> Decision:
        """An experiment in ``d`` with a new config; ACTED when ``d`` is exhausted (closed)."""
        n = self._next_index(view, inflight)
        config = self._propose(view, d, inflight, n)
        if config is None:
            self.moves.close(d, "exhausted: its knobs give no config not tried yet")
            return ACTED
        return Order(n, d.id, config, "search")

    def _propose(
        self, view: CampaignView, d: Direction, inflight: list[Order], n: int
    ) -> dict[str, JsonValue] | None:
        """A config of ``d`` drawn by the campaign's TPE study: its open knobs drawn, the
        others at its base config (the reference, or the experiment its plan starts from);
        neither run nor running. None when ``d`` cannot produce one."""
        space = self.ctx.space
        base = self._base_config(view, d)
        full = [{**base, **o.config} for o in inflight]
        tried = {config_key(r.config, space) for r in view.runs}
        tried |= {config_key(c, space) for c in full}
        study = build_study(space, view.runs, seed=sampler_seed(self.ctx.seed, n), running=full)
        found = suggest(study, space, set(knobs_of(d)), base, tried)
        return None if found is None else {k.name: found[k.name] for k in space}

    def _base_config(self, view: CampaignView, d: Direction) -> dict[str, JsonValue]:
        ref = view.ref_config()
        source = base_of(d)
        for run in view.runs:
            if source is not None and run.experiment_id == source:
                return {**ref, **run.config}
        return ref


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
