"""The campaign review: what a finished team campaign's orientations and findings led to, and
the revisions of orientations and knowledge that the next campaign on the lab starts from.

:func:`review_team_campaign` runs once, when a team campaign has spent its budget (before it
is marked finished, so the knowledge it revises goes through ``publish_finding`` like any
other finding). It reads only records and writes one :class:`~rsilab.records.CampaignReview`
holding the evidence and every revision it proposed, with the ones it made.

**Orientations.** Each orientation's experiments *paid* when they set a new team best, and its
supported findings and accepted candidates paid too. An orientation that paid more often per
experiment than the team as a whole gets a higher weight, one that paid less a lower one: the
new weight is the old one times the square root of the ratio of the two (smoothed) rates,
kept in [:data:`MIN_WEIGHT`, :data:`MAX_WEIGHT`]. A revision is proposed when the weight
moves by :data:`MIN_CHANGE` or more, and made only when the orientation ran at least
:data:`MIN_EXPERIMENTS` experiments (the others are recorded, not made). The built-in Leader
orders its start plan by weight (:func:`~rsilab.orchestrator._team_leader.initial_plan`), so
the next team starts with more of what paid. When nothing paid, no weight moves: the records
hold no evidence for one orientation over another.

**Knowledge.** A supported finding that the campaign followed in :data:`MIN_ADOPTIONS`
experiments or more, none of which paid (a new team best, or a gain over the reference above
the noise floor), is superseded by an unresolved finding that says so; a supported finding of
an earlier campaign whose knob this campaign found to work the other way is superseded by an
unresolved finding naming both. A superseded finding is no longer followed by built-in
exploiters (``query_findings`` shows what superseded it). A finding this campaign confirmed
(same knob, same better side) is recorded as confirmed and left as it is.

**Skills.** The built-in team uses no skill, so its review proposes none; the review record
has room for skill revisions that an LLM review may propose.
"""

from __future__ import annotations

import math
from collections import defaultdict

from rsilab.agents.builtin.team import VERBS, parse_effect_tag
from rsilab.memory import latest_orientation, revise_orientation
from rsilab.memory.assignments import ORIENTATION_PREFIX
from rsilab.orchestrator._context import RunContext
from rsilab.orchestrator._state import Run
from rsilab.orchestrator._team_state import TeamView
from rsilab.records import (
    Adoption,
    CampaignReview,
    Candidate,
    CandidateState,
    EventDraft,
    Finding,
    FindingOutcome,
    FindingStatus,
    OrientationOutcome,
    RevisionProposal,
    Role,
)
from rsilab.store.base import Store

__all__ = ["REVIEWER", "campaign_review_of", "review_team_campaign"]

REVIEWER = "campaign-review"
"""The actor name of the review in the records."""
MIN_EXPERIMENTS = 4
"""Experiments an orientation needs before its weight is revised."""
MIN_ADOPTIONS = 3
"""Experiments following a finding before the review judges whether following it paid."""
MIN_CHANGE = 0.1
"""Relative change of a weight below which no revision is proposed."""
MIN_WEIGHT, MAX_WEIGHT = 0.25, 4.0
"""The range a revised weight is kept in."""
OPPOSITE = {"raise": "lower", "lower": "raise", "change": "keep", "keep": "change"}
assert set(OPPOSITE) == set(VERBS)


def campaign_review_of(store: Store, campaign_id: str) -> CampaignReview | None:
    """The review of ``campaign_id``, if it has one."""
    found = store.query_as(CampaignReview, campaign_id=campaign_id)
    return min(found, key=lambda r: r.created_at) if found else None


def review_team_campaign(ctx: RunContext) -> CampaignReview:
    """Review the team campaign of ``ctx`` and make the revisions the evidence supports
    (see the module docstring); the existing review when it has one (a resumed campaign is
    reviewed once). Knowledge revisions go through ``publish_finding``, so the campaign must
    still be running."""
    store = ctx.store
    existing = campaign_review_of(store, ctx.campaign_id)
    if existing is not None:
        return existing
    tv = TeamView.load(ctx)
    paying = _paying_runs(tv)
    orientations = _orientation_outcomes(store, ctx.campaign_id, tv)
    findings = _finding_outcomes(ctx, tv, paying)
    proposals = _orientation_revisions(store, orientations)
    proposals += _knowledge_revisions(ctx, tv, findings)
    made = [_make(ctx, p) for p in proposals]
    review = CampaignReview(
        campaign_id=ctx.campaign_id,
        reviewer=REVIEWER,
        task=ctx.task.name,
        orientations=orientations,
        findings=findings,
        revisions=made,
        conclusion=_conclusion(orientations, made),
    )
    accepted = sum(1 for p in made if p.accepted)
    draft = EventDraft(
        actor=REVIEWER,
        role=str(Role.CONTROLLER),
        action="campaign_reviewed",
        detail=f"{ctx.campaign_id}: {accepted} of {len(made)} proposed revisions made",
    )
    store.commit(draft, [review])
    return review


# -- outcomes ------------------------------------------------------------------------------------


def _paying_runs(tv: TeamView) -> set[str]:
    """Experiment ids of runs that set a new team best or beat the reference by more than
    the noise floor."""
    news = tv.new_bests()
    ref = tv.view.ref_score
    return {
        r.experiment_id
        for r in tv.view.runs
        if not r.failed
        and (r.index in news or (ref is not None and r.score - ref > tv.noise_floor))
    }


def _orientation_outcomes(store: Store, cid: str, tv: TeamView) -> list[OrientationOutcome]:
    news = tv.new_bests()
    ref = tv.view.ref_score
    runs: dict[str, list[Run]] = defaultdict(list)
    for run in tv.view.runs:
        a = tv.assignment_of(run)
        if a is not None:
            runs[a.orientation].append(run)
    candidates = {c.experiment_id: c for c in store.query_as(Candidate, campaign_id=cid)}
    experiments = tv.experiments
    out = []
    for name in sorted({a.orientation for a in tv.history}):
        held = [a for a in tv.history if a.orientation == name]
        mine = runs.get(name, [])
        scored = [r.score - ref for r in mine if not r.failed and ref is not None]
        proposed = [candidates[r.experiment_id] for r in mine if r.experiment_id in candidates]
        accepted = [c for c in proposed if c.state is CandidateState.ACCEPTED]
        supported = [
            f for f in tv.findings if f.orientation == name and f.status is FindingStatus.SUPPORTED
        ]
        bests = [r for r in mine if r.index in news]
        out.append(
            OrientationOutcome(
                orientation=name,
                orientation_ids=list(dict.fromkeys(a.orientation_id for a in held)),
                researchers=sorted({a.researcher for a in held}),
                experiments=len(mine),
                new_bests=len(bests),
                best_gain=max(scored) if scored else None,
                supported_findings=len(supported),
                candidates=len(proposed),
                accepted=len(accepted),
                paid=len(bests) + len(supported) + len(accepted),
                cpu_s=sum(
                    experiments[r.experiment_id].resources.cpu_s
                    for r in mine
                    if r.experiment_id in experiments
                ),
                evidence=[
                    *(r.experiment_id for r in bests),
                    *(f.id for f in supported),
                    *(c.id for c in accepted),
                ][:50],
            )
        )
    return out


def _finding_outcomes(ctx: RunContext, tv: TeamView, paying: set[str]) -> list[FindingOutcome]:
    store, cid = ctx.store, ctx.campaign_id
    adopted: dict[str, list[str]] = defaultdict(list)
    adoptions: dict[str, int] = defaultdict(int)
    for a in store.query_as(Adoption, campaign_id=cid):
        adoptions[a.finding_id] += 1
        adopted[a.finding_id].extend(a.experiment_ids)
    ids = list(dict.fromkeys([*adopted, *(f.id for f in tv.findings)]))
    out = []
    for fid in ids:
        finding = store.get_as(fid, Finding)
        exps = list(dict.fromkeys(adopted.get(fid, [])))
        paid = sum(1 for e in exps if e in paying)
        if not exps:
            verdict = "published in this campaign; not followed in it"
        elif paid:
            verdict = "followed; some of the experiments that followed it paid"
        else:
            verdict = "followed; none of the experiments that followed it paid"
        out.append(
            FindingOutcome(
                finding_id=fid,
                status=str(finding.status),
                origin_campaign_id=finding.origin_campaign_id,
                adoptions=adoptions.get(fid, 0),
                adopting_experiments=exps,
                paid=paid,
                verdict=verdict,
            )
        )
    return out


# -- proposals -----------------------------------------------------------------------------------


def _orientation_revisions(
    store: Store, outcomes: list[OrientationOutcome]
) -> list[RevisionProposal]:
    total_exp = sum(o.experiments for o in outcomes)
    total_paid = sum(o.paid for o in outcomes)
    if total_paid == 0 or total_exp == 0:
        return []
    team_rate = (total_paid + 0.5) / (total_exp + 1)
    out = []
    for o in outcomes:
        if o.experiments == 0:
            continue
        latest = latest_orientation(store, ORIENTATION_PREFIX + o.orientation)
        if latest is None:
            continue
        rate = (o.paid + 0.5) / (o.experiments + 1)
        new = min(MAX_WEIGHT, max(MIN_WEIGHT, latest.weight * math.sqrt(rate / team_rate)))
        new = round(new, 2)
        if abs(new / latest.weight - 1) < MIN_CHANGE:
            continue
        enough = o.experiments >= MIN_EXPERIMENTS
        out.append(
            RevisionProposal(
                kind="orientation",
                name=latest.name,
                change=f"weight {latest.weight:g} -> {new:g}",
                reason=(
                    f"{o.orientation}: {o.paid} paying results in {o.experiments} experiments "
                    f"({o.new_bests} new team bests, {o.supported_findings} supported findings, "
                    f"{o.accepted} accepted candidates); the team: {total_paid} in "
                    f"{total_exp}"
                ),
                evidence=o.evidence,
                accepted=enough,
                why_not=""
                if enough
                else f"only {o.experiments} experiments under it "
                f"(a revision needs {MIN_EXPERIMENTS})",
                from_id=latest.id,
            )
        )
    return out


def _knowledge_revisions(
    ctx: RunContext, tv: TeamView, outcomes: list[FindingOutcome]
) -> list[RevisionProposal]:
    store, space = ctx.store, ctx.task.search_space
    current = {f.id: f for f in store.query_as(Finding, fields={"task": ctx.task.name})}
    superseded = {f.supersedes for f in current.values() if f.supersedes}
    live = {
        fid: f
        for fid, f in current.items()
        if fid not in superseded and f.status is FindingStatus.SUPPORTED
    }
    out: list[RevisionProposal] = []
    for o in outcomes:
        if o.finding_id in live and len(o.adopting_experiments) >= MIN_ADOPTIONS and not o.paid:
            out.append(
                RevisionProposal(
                    kind="knowledge",
                    name=o.finding_id,
                    change="supported -> unresolved",
                    reason=f"followed in {len(o.adopting_experiments)} experiments of "
                    f"{ctx.campaign_id}; none set a new team best or beat the reference by more "
                    "than the noise floor",
                    evidence=o.adopting_experiments[:50],
                    accepted=True,
                    from_id=o.finding_id,
                )
            )
    named = {p.from_id for p in out}
    mine = {}
    for f in tv.findings:  # the campaign's latest settled finding per knob
        for tag in f.tags:
            parsed = parse_effect_tag(tag, space)
            if parsed is not None and f.status is FindingStatus.SUPPORTED and f.id in live:
                mine[parsed[0].name] = (f, parsed[1])
    for fid, f in live.items():
        if f.origin_campaign_id == ctx.campaign_id or fid in named:
            continue
        for tag in f.tags:
            parsed = parse_effect_tag(tag, space)
            if parsed is None or parsed[0].name not in mine:
                continue
            ours, verb = mine[parsed[0].name]
            if verb == OPPOSITE[parsed[1]]:
                out.append(
                    RevisionProposal(
                        kind="knowledge",
                        name=fid,
                        change="supported -> unresolved (conflicting evidence)",
                        reason=f"{fid} says {tag!r}; {ours.id} of {ctx.campaign_id} says "
                        f"{verb} {parsed[0].name!r}: the effect depends on conditions the "
                        "records do not separate",
                        evidence=[fid, ours.id],
                        accepted=True,
                        from_id=fid,
                    )
                )
    return out


def _make(ctx: RunContext, p: RevisionProposal) -> RevisionProposal:
    """Make an accepted proposal (a new record); the proposal with its ``to_id`` set."""
    if not p.accepted or p.from_id is None:
        return p
    if p.kind == "orientation":
        latest = latest_orientation(ctx.store, p.name)
        assert latest is not None
        weight = float(p.change.rsplit(" ", 1)[1])
        made = revise_orientation(
            ctx.store,
            p.name,
            latest.text,
            actor=REVIEWER,
            role=Role.CONTROLLER,
            reason=f"review of {ctx.campaign_id}: {p.change}",
            weight=weight,
        )
        return p.model_copy(update={"to_id": made.id})
    old = ctx.store.get_as(p.from_id, Finding)
    answer = ctx.door.for_actor(REVIEWER).reviewer(
        "publish_finding",
        claim=f"Open again: {old.claim}",
        status="unresolved",
        conditions=f"review of team campaign {ctx.campaign_id}",
        uncertainty=(
            "superseded by the campaign review: "
            + (
                "the records it cites hold both sides"
                if "conflict" in p.change
                else "the experiments it cites followed it and none set a new team best or beat "
                "the reference by more than the noise floor"
            )
        ),
        sources=p.evidence[:50],
        tags=old.tags,
        supersedes=old.id,
    )
    return p.model_copy(update={"to_id": str(answer["id"])})


def _conclusion(outcomes: list[OrientationOutcome], made: list[RevisionProposal]) -> str:
    ranked = sorted(outcomes, key=lambda o: -(o.paid / o.experiments if o.experiments else 0))
    parts = [f"{o.orientation} {o.paid}/{o.experiments}" for o in ranked if o.experiments]
    done = [p for p in made if p.accepted]
    text = "paid per experiment: " + (", ".join(parts) or "no experiments")
    if done:
        text += "; revised: " + "; ".join(f"{p.name} ({p.change})" for p in done)
    else:
        text += "; no revision: the records hold no evidence for one"
    return text
