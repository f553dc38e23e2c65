"""The team's Leader: orients each researcher from the task, then redirects it from the records.

Every decision is an ``assign_orientation`` call (role leader, actor ``leader``): an
:class:`~rsilab.records.Assignment` with its reason in words and the records it rests on.

- **At the start** (once the reference runs are done), :func:`initial_plan` orients the team
  from the task and the reference: explorer, exploiter, analyst, verifier, in that order,
  further researchers exploring (four knobs or more) or exploiting; the verifier comes before
  the analyst when the reference's re-runs show a noise floor above
  :attr:`TeamSettings.high_noise`, and the analyst goes last with two knobs or fewer, or gives
  way to an exploiter where the setting returns no dev scores (its findings could not be
  checked).
- **At each checkpoint** (every :attr:`TeamSettings.checkpoint_every` experiments): a gain over
  the reference worth verifying
  (:meth:`~rsilab.orchestrator.builtin.team._state.TeamView.unverified`),
  with nobody verifying, makes a verifier of the researcher that can best be spared (a
  stalled one first, then an explorer, an analyst, an exploiter); then each explorer,
  exploiter or analyst whose orientation stopped paying (its last
  :attr:`TeamSettings.patience` experiments under the assignment brought no new team best;
  for an analyst, no supported finding) is redirected to the orientation most needed
  (:meth:`Leader.needed`).
- **When a researcher has nothing to do** while the budget allows more (a verifier with
  nothing to verify, an analyst with every knob settled), it is redirected at once.

With one researcher this makes it alternate: it explores first; it verifies when a gain is
worth verifying; it analyses once enough runs exist and a knob is unsettled; it exploits while
the best improves; it goes back to exploring when exploiting stalls.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from rsilab.memory import latest_orientation
from rsilab.memory.assignments import ORIENTATION_PREFIX
from rsilab.orchestrator.builtin._context import RunContext
from rsilab.orchestrator.builtin.team._analyst import settled_knobs
from rsilab.orchestrator.builtin.team._researcher import ANALYST, EXPLOITER, EXPLORER, VERIFIER
from rsilab.orchestrator.builtin.team._state import TeamView
from rsilab.orchestrator.builtin.worker._agent import Order
from rsilab.records import Assignment, DataTier, FindingStatus, Role

LEADER = "leader"


@dataclass(frozen=True)
class TeamSettings:
    """The Leader's rules of thumb (tuned on nothing yet; the synthetic task's scale)."""

    checkpoint_every: int = 3
    """Experiments done between two checkpoints."""
    patience: int = 4
    """Experiments under an assignment without paying before a redirect."""
    high_noise: float = 0.05
    """Noise floor (dev score units) from which verification comes before analysis."""
    analyst_min_runs: int = 6
    """Runs the team needs before an analyst is called in by a redirect."""
    share_memory: bool = True
    """False: each researcher sees only its own runs and findings (and the reference's), as
    if it worked alone; the controller's decisions are still everyone's."""
    orientations: bool = True
    """False: no Leader orients the team as a whole; each researcher is led as a team of one
    (it alternates between the behaviours on its own records)."""


@dataclass(frozen=True)
class Reason:
    """A decision's reason in words and the records it rests on."""

    text: str
    evidence: list[str]


def initial_plan(
    team: int,
    knobs: int,
    noise: float,
    dev: bool,
    settings: TeamSettings,
    weights: Mapping[str, float] | None = None,
) -> list[str]:
    """The orientations of a team of ``team`` at the start (see the module docstring).

    ``weights`` (the latest Orientation records' weights, which campaign reviews revise)
    reorder the plan, higher first, where they differ; equal weights keep the rules' order.
    """
    w = weights or {}
    order = [EXPLORER, EXPLOITER, ANALYST, VERIFIER]
    if noise >= settings.high_noise:
        order = [EXPLORER, EXPLOITER, VERIFIER, ANALYST]
    if knobs <= 2:
        order = [o for o in order if o != ANALYST] + [ANALYST]
    if not dev:
        order = [EXPLOITER if o == ANALYST else o for o in order]
    order = sorted(order, key=lambda o: -w.get(o, 1.0))  # stable: ties keep the rules' order
    extras = [EXPLORER, EXPLOITER] if knobs >= 4 else [EXPLOITER, EXPLORER]
    extra = max(extras, key=lambda o: w.get(o, 1.0))  # the first of a tie
    return (order + [extra] * team)[:team]


class Leader:
    """Assigns and redirects orientations (see the module docstring)."""

    def __init__(self, ctx: RunContext, names: list[str], settings: TeamSettings) -> None:
        self.ctx, self.names, self.settings = ctx, names, settings

    # -- decisions ------------------------------------------------------------------------------

    def initial(self, tv: TeamView) -> None:
        """Orient every researcher that has no assignment yet."""
        knobs = len(self.ctx.space)
        dev = self.ctx.tier is DataTier.DEV
        weights = {
            name: o.weight
            for name in (EXPLORER, EXPLOITER, ANALYST, VERIFIER)
            if (o := latest_orientation(self.ctx.store, ORIENTATION_PREFIX + name)) is not None
        }
        plan = initial_plan(len(self.names), knobs, tv.noise_floor, dev, self.settings, weights)
        ref = tv.reference_direction()
        ref_runs = [r.experiment_id for r in tv.view.runs_in(ref.id)] if ref else []
        measured = "measured from the reference's re-runs" if len(ref_runs) >= 2 else "default"
        facts = f"{knobs} knobs; noise floor {tv.noise_floor:.4f} ({measured})"
        if len(set(weights.values())) > 1:
            facts += "; orientation weights from campaign reviews " + ", ".join(
                f"{n} {w:g}" for n, w in weights.items()
            )
        for name, orientation in zip(self.names, plan, strict=True):
            if name not in tv.assignments:
                why = _START[orientation].format(knobs=knobs)
                if len(self.names) == 1:
                    why += "; with one researcher the Leader switches it as the records call for"
                self._assign(name, orientation, Reason(f"{facts}: {why}", ref_runs))

    def checkpoint(self, tv: TeamView, inflight: list[Order]) -> None:
        """Redirect researchers as the records call for (see the module docstring)."""
        moved: set[str] = set()
        orientations = {n: a.orientation for n, a in tv.assignments.items()}
        verify = self._verification_due(tv, inflight)
        if verify is not None and VERIFIER not in orientations.values():
            spare = self._spare(tv)
            if spare is not None:
                self._assign(spare, VERIFIER, verify)
                moved.add(spare)
                tv = TeamView.load(self.ctx)
        for name in self.names:
            a = tv.assignments.get(name)
            if name in moved or a is None or a.orientation == VERIFIER:
                continue
            stalled = self._stalled(tv, a)
            if stalled is not None:
                to, why = self.needed(tv, a.orientation, inflight)
                self._assign(name, to, _joined(stalled, why))
                tv = TeamView.load(self.ctx)

    def on_idle(self, tv: TeamView, name: str, inflight: list[Order]) -> bool:
        """Redirect ``name``, which has nothing to do; False when it has no assignment yet."""
        a = tv.assignments.get(name)
        if a is None:
            return False
        off = _IDLE.get(a.orientation, "no untried move left").format(floor=tv.noise_floor)
        to, why = self.needed(tv, a.orientation, inflight)
        idle = Reason(f"{a.orientation} {name} has {off}", _idle_evidence(tv, a))
        self._assign(name, to, _joined(idle, why))
        return True

    def needed(self, tv: TeamView, current: str, inflight: list[Order]) -> tuple[str, Reason]:
        """The orientation the team lacks most, never ``current``, and why."""
        have = Counter(a.orientation for a in tv.assignments.values())
        team = [a.id for a in tv.assignments.values()]  # who does what now
        due = self._verification_due(tv, inflight)
        if due is not None and not have[VERIFIER] and current != VERIFIER:
            return VERIFIER, due
        space = [k.name for k in self.ctx.space]
        open_knobs = [k for k in space if k not in settled_knobs(self.ctx, tv)]
        runs = len(tv.view.runs)
        if (
            current != ANALYST
            and not have[ANALYST]
            and self.ctx.tier is DataTier.DEV
            and runs >= self.settings.analyst_min_runs
            and open_knobs
        ):
            why = f"{runs} runs and no analyst while {', '.join(open_knobs)} are unsettled"
            return ANALYST, Reason(why, [*team, *(r.experiment_id for r in tv.view.runs[-10:])])
        best, ref = tv.best(), tv.view.ref_score
        if (
            current != EXPLOITER
            and not have[EXPLOITER]
            and best is not None
            and ref is not None
            and best.score > ref
        ):
            why = f"nobody refines the team's best, {best.experiment_id}"
            return EXPLOITER, Reason(why, [*team, best.experiment_id])
        if current != EXPLORER and not have[EXPLORER]:
            return EXPLORER, Reason("nobody explores the space", team)
        if current != EXPLOITER:
            shown = [best.experiment_id] if best is not None else []
            return EXPLOITER, Reason("exploiting the team's best instead", [*team, *shown])
        return EXPLORER, Reason("exploring wide instead", team)

    # -- helpers --------------------------------------------------------------------------------

    def _verification_due(self, tv: TeamView, inflight: list[Order]) -> Reason | None:
        left = self.ctx.budget.experiments - len(tv.view.runs) - len(inflight)
        found = tv.unverified(self.ctx.space, inflight)
        if not found or left < self.ctx.verify_seeds or tv.view.ref_score is None:
            return None
        best = found[0]
        why = (
            f"{best.experiment_id} beats the reference by {best.score - tv.view.ref_score:.4f}, "
            f"worth re-running against a noise floor of {tv.noise_floor:.4f}, and nobody has "
            "verified it"
        )
        return Reason(why, [best.experiment_id, *tv.view.ref_ids])

    def _stalled(self, tv: TeamView, a: Assignment) -> Reason | None:
        k = self.settings.patience
        runs = tv.runs_under(a)
        if len(runs) < k:
            return None
        last = runs[-k:]
        ids = [r.experiment_id for r in last]
        if a.orientation == ANALYST:
            since = tv.experiments[ids[0]].created_at if ids[0] in tv.experiments else ""
            settled = [
                f
                for f in tv.findings
                if f.author == a.researcher
                and f.status is FindingStatus.SUPPORTED
                and f.created_at >= since
            ]
            if settled:
                return None
            text = f"its last {k} experiments ({', '.join(ids)}) brought no supported finding"
        else:
            if any(r.index in tv.new_bests() for r in last):
                return None
            text = f"its last {k} experiments ({', '.join(ids)}) brought no new team best"
        return Reason(f"{a.orientation} {a.researcher}: {text}", ids)

    def _spare(self, tv: TeamView) -> str | None:
        """The researcher the team misses least: a stalled one, else by orientation."""
        rank = {EXPLORER: 0, ANALYST: 1, EXPLOITER: 2}
        options = [
            (self._stalled(tv, a) is None, rank.get(a.orientation, 1), n)
            for n, a in tv.assignments.items()
            if a.orientation != VERIFIER
        ]
        return min(options)[2] if options else None

    def _assign(self, name: str, orientation: str, reason: Reason) -> None:
        evidence = list(dict.fromkeys(reason.evidence))[:50]
        self.ctx.door.call(
            Role.LEADER,
            LEADER,
            "assign_orientation",
            researcher=name,
            orientation=orientation,
            reason=reason.text,
            evidence_ids=evidence,
        )
        self.ctx.say("team", f"leader: {name} is now {orientation}: {reason.text}")


_START = {
    EXPLORER: "someone explores wide from the reference",
    EXPLOITER: "someone refines the best config, the reference until a run beats it",
    ANALYST: "with {knobs} knobs, which matter and which way steers the others (findings)",
    VERIFIER: "gains are re-run on fresh seeds before anyone builds on them or proposes them",
}
_IDLE = {
    VERIFIER: "nothing to verify (no unverified gain worth it against the noise floor "
    "{floor:.4f}, or too little budget left to re-run one)",
    ANALYST: "no knob left to contrast (each is settled by a finding, or cannot be contrasted)",
}


def _idle_evidence(tv: TeamView, a: Assignment) -> list[str]:
    """What an idle researcher's redirect rests on: its assignment, its verifications or the
    campaign's findings (verifier, analyst), its own last runs, and the reference."""
    ids = [a.id]
    if a.orientation == VERIFIER:
        ids += list(tv.verifications())
    elif a.orientation == ANALYST:
        ids += [f.id for f in tv.findings]
    ids += [r.experiment_id for r in tv.runs_under(a)[-5:]]
    return [*ids, *tv.view.ref_ids]


def _joined(off: Reason, to: Reason) -> Reason:
    return Reason(f"{off.text}; {to.text}", [*off.evidence, *to.evidence])
