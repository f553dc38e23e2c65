"""The analyst's findings: each knob's effect on the target, from the team's own runs.

For every knob, the team's successful runs split into those with the knob above the reference's
value and those below it (changed against kept, for a choice or a bool;
:func:`~rsilab.orchestrator.builtin.team._rules.knob_groups`). Once each side holds two runs, the
analyst computes the difference of their mean dev target scores with a Welch interval and publishes
it through ``publish_finding``: claimed ``supported`` when the interval excludes zero, else
``unresolved`` (an open problem). The tool recomputes the claim from the records and stores no more
than they bear out, so the status a finding ends with is the tool's, not the analyst's. Each finding
is tagged with the knob and its effect tag (``raise lr``...), which built-in exploiters follow. An
unresolved finding is published again, superseding the last, once enough more runs weigh in
(:data:`GROWTH`); a supported or refuted one settles the knob.

The dev tier only: where the task's setting returns no dev scores, there is nothing the
tool could check, and the analyst publishes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rsilab.memory.effect_tags import effect_tag
from rsilab.orchestrator.builtin._context import RunContext
from rsilab.orchestrator.builtin.team._rules import KnobGroups, knob_groups
from rsilab.orchestrator.builtin.team._state import TeamView
from rsilab.records import DataTier, Finding, FindingStatus, Interval
from rsilab.stats import welch_interval

GROWTH = 2
"""More runs, over both groups, before an unresolved knob is published again (or a quarter
more, when that is more)."""


@dataclass(frozen=True)
class Publication:
    """A finding due: the knob's groups, the effect computed and what it supersedes."""

    groups: KnobGroups
    effect: Interval
    """Mean of group a's raw target scores minus group b's."""
    supersedes: str | None
    higher_is_better: bool = True
    """The target's direction."""

    @property
    def a_higher(self) -> bool:
        """Group a's raw scores are higher (what the finding claims, in the metric's units)."""
        return self.effect.value > 0

    @property
    def a_better(self) -> bool:
        """Group a scores better in the target's direction (what the effect tag says)."""
        return self.a_higher == self.higher_is_better

    @property
    def supported(self) -> bool:
        return self.effect.low > 0 or self.effect.high < 0


def latest_by_knob(tv: TeamView, knobs: list[str]) -> dict[str, Finding]:
    """The campaign's latest finding tagged with each knob."""
    out: dict[str, Finding] = {}
    for finding in tv.findings:
        for tag in finding.tags:
            if tag in knobs:
                out[tag] = finding
    return out


def settled_knobs(ctx: RunContext, tv: TeamView) -> set[str]:
    """Knobs whose latest finding in this campaign is supported or refuted."""
    names = [k.name for k in ctx.space]
    latest = latest_by_knob(tv, names)
    return {k for k, f in latest.items() if f.status is not FindingStatus.UNRESOLVED}


def due(ctx: RunContext, tv: TeamView) -> list[Publication]:
    """The findings the analyst has to publish now (see the module docstring)."""
    if ctx.tier is not DataTier.DEV:
        return []
    target, space, ref = ctx.target, ctx.space, tv.view.ref_config()
    scored = {r.experiment_id: r for r in tv.view.runs if not r.failed and target in r.scores}
    runs = [(i, r.config) for i, r in scored.items()]
    latest = latest_by_knob(tv, [k.name for k in space])
    out = []
    for g in knob_groups(space, ref, runs):
        last = latest.get(g.knob)
        if not g.testable() or (last is not None and not _grown(last, g)):
            continue
        a = [scored[i].scores[target] for i in g.a]
        b = [scored[i].scores[target] for i in g.b]
        higher = ctx.target_benchmark.higher_is_better
        out.append(Publication(g, welch_interval(a, b), last.id if last else None, higher))
    return out


def _grown(last: Finding, g: KnobGroups) -> bool:
    if last.status is not FindingStatus.UNRESOLVED:
        return False
    claim = last.structured
    before = len(claim.a_ids) + len(claim.b_ids) if claim is not None else 0
    return len(g.a) + len(g.b) >= before + max(GROWTH, before // 4)


def publish(ctx: RunContext, tv: TeamView, pub: Publication) -> dict[str, Any]:
    """Publish ``pub`` as the analyst (its text holds no number the tool could not match)."""
    g, target = pub.groups, ctx.target
    side = "higher" if pub.a_higher else "lower"
    if g.numeric:
        claim = (
            f"On dev {target}, runs with {g.knob} above the reference's value score {side} "
            f"than runs with {g.knob} below it"
        )
    else:
        claim = (
            f"On dev {target}, runs that change {g.knob} from the reference's value score "
            f"{side} than runs that keep it"
        )
    held = "it excludes zero" if pub.supported else "it includes zero: open until more runs"
    ref = tv.view.ref_ids[0] if tv.view.ref_ids else "none"
    return ctx.door.reviewer(
        "publish_finding",
        claim=claim,
        status="supported" if pub.supported else "unresolved",
        conditions=(
            f"team campaign {ctx.campaign_id}, reference experiment {ref}; the other knobs "
            "vary across the runs, so this is a main effect, not a controlled contrast"
        ),
        uncertainty=f"Welch interval over {len(g.a)} and {len(g.b)} experiments; {held}",
        metric=target,
        a_ids=g.a,
        b_ids=g.b,
        direction=side,
        tags=[g.knob, effect_tag(g.knob, g.verb(pub.a_better))],
        supersedes=pub.supersedes,
    )
