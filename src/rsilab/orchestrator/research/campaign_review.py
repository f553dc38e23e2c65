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
orders its start plan by weight (:func:`~rsilab.orchestrator.builtin.team._leader.initial_plan`), so
the next team starts with more of what paid. When nothing paid, no weight moves: the records
hold no evidence for one orientation over another.

**Knowledge.** A supported finding that the campaign followed in :data:`MIN_ADOPTIONS`
experiments or more, none of which paid (a new team best, or a gain over the reference above
the noise floor), is superseded by an unresolved finding that says so; a supported finding of
an earlier campaign whose knob this campaign found to work the other way is superseded by an
unresolved finding naming both. A superseded finding is no longer followed by built-in
exploiters (``query_findings`` shows what superseded it). A finding this campaign confirmed
(same knob, same better side) is recorded as confirmed and left as it is.

**Skills.** The built-in runners verify a gain on the number of fresh seeds the lab's
``builtin:verify-gain`` skill gives (:mod:`rsilab.memory.builtin_skills`). When the controller
rejected at least as many of the campaign's verified proposals (made from a verify
direction's re-runs) as it accepted, and at least one, the review adds a seed (up to 5); when
it accepted all of three or more, it takes one back (down to 2); made once the controller has
judged :data:`MIN_JUDGED` of them. The next campaign verifies on the revised number.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from rsilab.memory import (
    ensure_builtin_skills,
    fresh_seeds,
    latest_orientation,
    revise_orientation,
    revise_skill,
    seeds_revision,
    verify_code,
)
from rsilab.memory.assignments import ORIENTATION_PREFIX, assignments_of
from rsilab.memory.effect_tags import VERBS, parse_effect_tag
from rsilab.orchestrator.door import Door
from rsilab.orchestrator.writer import write
from rsilab.records import (
    Adoption,
    Assignment,
    CampaignReview,
    Candidate,
    CandidateState,
    Direction,
    EdgeRelation,
    Experiment,
    ExperimentState,
    Finding,
    FindingOutcome,
    FindingStatus,
    Orientation,
    OrientationOutcome,
    RevisionProposal,
    Role,
)
from rsilab.store.base import Store, StoreReader
from rsilab.tasks import Task

__all__ = ["REVIEWER", "campaign_review_of", "review_team_campaign"]

REVIEWER = "campaign-review"
"""The actor name of the review in the records."""
MIN_EXPERIMENTS = 4
"""Experiments an orientation needs before its weight is revised."""
MIN_ADOPTIONS = 3
"""Experiments following a finding before the review judges whether following it paid."""
MIN_JUDGED = 2
"""Verified proposals the controller must have judged before the verify skill is revised."""
MIN_CHANGE = 0.1
"""Relative change of a weight below which no revision is proposed."""
MIN_WEIGHT, MAX_WEIGHT = 0.25, 4.0
"""The range a revised weight is kept in."""
OPPOSITE = {"raise": "lower", "lower": "raise", "change": "keep", "keep": "change"}
assert set(OPPOSITE) == set(VERBS)


def campaign_review_of(store: StoreReader, campaign_id: str) -> CampaignReview | None:
    """The review of ``campaign_id``, if it has one."""
    found = store.query_as(CampaignReview, campaign_id=campaign_id)
    return min(found, key=lambda r: r.created_at) if found else None


def review_team_campaign(store: Store, task: Task, campaign_id: str, door: Door) -> CampaignReview:
    """Review the team campaign ``campaign_id`` and make the revisions the evidence supports
    (see the module docstring); the existing review when it has one (a resumed campaign is
    reviewed once). It reads only records, so built-in and LLM teams are reviewed alike.
    Knowledge revisions go through ``publish_finding`` on ``door``, so the campaign must
    still be running."""
    existing = campaign_review_of(store, campaign_id)
    if existing is not None:
        return existing
    record = _Records.load(store, task, campaign_id)
    orientations = _orientation_outcomes(record)
    findings = _finding_outcomes(store, record)
    pending = _orientation_revisions(store, campaign_id, orientations)
    pending += _skill_revisions(store, record)
    pending += _knowledge_revisions(store, task, campaign_id, record.findings, findings, door)
    made = [p.made() for p in pending]
    review = CampaignReview(
        campaign_id=campaign_id,
        reviewer=REVIEWER,
        task=task.name,
        orientations=orientations,
        findings=findings,
        revisions=made,
        conclusion=_conclusion(orientations, made),
    )
    accepted = sum(1 for p in made if p.accepted)
    detail = f"{campaign_id}: {accepted} of {len(made)} proposed revisions made"
    write(store, "campaign_reviewed", [review], detail=detail, actor=REVIEWER)
    return review


# -- outcomes ------------------------------------------------------------------------------------


@dataclass
class _Records:
    """What the review reads: the campaign's experiments in creation order, each with the
    assignment it was made under, the runs that paid, its candidates and findings."""

    campaign_id: str
    experiments: list[Experiment]
    under: dict[str, Assignment]
    """Experiment id -> the assignment of its researcher in force when it was created."""
    new_bests: set[str]
    """Experiments whose dev target score beat every earlier one's (not the first scored)."""
    gains: dict[str, float]
    """Experiment id -> its dev target score minus the first scored experiment's (the
    reference), signed so that a gain is positive."""
    candidates: dict[str, Candidate]
    """Experiment id -> its candidate."""
    history: list[Assignment]
    findings: list[Finding]
    """The campaign's own findings, oldest first."""
    adoptions: list[Adoption]

    @classmethod
    def load(cls, store: Store, task: Task, campaign_id: str) -> _Records:
        target = task.targets[0]
        exps = sorted(
            store.query_as(Experiment, campaign_id=campaign_id), key=lambda e: (e.created_at, e.id)
        )
        history = assignments_of(store, campaign_id)
        under: dict[str, Assignment] = {}
        for e in exps:
            held = [
                a for a in history if a.researcher == e.created_by and a.created_at <= e.created_at
            ]
            if held:
                under[e.id] = held[-1]
        news: set[str] = set()
        gains: dict[str, float] = {}
        first: float | None = None
        best = float("-inf")
        for e in exps:
            score = dev.value if (dev := e.last_metric(target.name)) is not None else None
            if score is None or e.state is ExperimentState.FAILED:
                continue
            score = target.oriented(score)
            if first is None:
                first = score
            elif score > best:
                news.add(e.id)
            best = max(best, score)
            gains[e.id] = score - first
        findings = sorted(
            store.query_as(Finding, fields={"origin_campaign_id": campaign_id}),
            key=lambda f: f.created_at,
        )
        return cls(
            campaign_id,
            exps,
            under,
            news,
            gains,
            {
                c.experiment_id: c
                for c in store.query_as(Candidate, campaign_id=campaign_id)
                if c.experiment_id is not None
            },
            history,
            findings,
            store.query_as(Adoption, campaign_id=campaign_id),
        )

    def paying(self) -> set[str]:
        """Experiments that set a new best or whose candidate was accepted."""
        accepted = {e for e, c in self.candidates.items() if c.state is CandidateState.ACCEPTED}
        return self.new_bests | accepted


def _orientation_outcomes(rec: _Records) -> list[OrientationOutcome]:
    out = []
    for name in sorted({a.orientation for a in rec.history}):
        held = [a for a in rec.history if a.orientation == name]
        mine = [
            e for e in rec.experiments if e.id in rec.under and rec.under[e.id].orientation == name
        ]
        gains = [rec.gains[e.id] for e in mine if e.id in rec.gains]
        proposed = [rec.candidates[e.id] for e in mine if e.id in rec.candidates]
        accepted = [c for c in proposed if c.state is CandidateState.ACCEPTED]
        supported = [
            f
            for f in rec.findings
            if f.orientation.removeprefix(ORIENTATION_PREFIX) == name
            and f.status is FindingStatus.SUPPORTED
        ]
        bests = [e for e in mine if e.id in rec.new_bests]
        out.append(
            OrientationOutcome(
                orientation=name,
                orientation_ids=list(dict.fromkeys(a.orientation_id for a in held)),
                researchers=sorted({a.researcher for a in held}),
                experiments=len(mine),
                new_bests=len(bests),
                best_gain=max(gains) if gains else None,
                supported_findings=len(supported),
                candidates=len(proposed),
                accepted=len(accepted),
                paid=len(bests) + len(supported) + len(accepted),
                cpu_s=sum(e.resources.cpu_s for e in mine),
                evidence=[
                    *(e.id for e in bests),
                    *(f.id for f in supported),
                    *(c.id for c in accepted),
                ][:50],
            )
        )
    return out


def _finding_outcomes(store: Store, rec: _Records) -> list[FindingOutcome]:
    paying = rec.paying()
    adopted: dict[str, list[str]] = defaultdict(list)
    adoptions: dict[str, int] = defaultdict(int)
    for a in rec.adoptions:
        adoptions[a.finding_id] += 1
        adopted[a.finding_id].extend(a.experiment_ids)
    known = {f.id: f for f in rec.findings}
    out = []
    for fid in dict.fromkeys([*adopted, *known]):
        finding = known.get(fid) or store.get_as(fid, Finding)
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


@dataclass
class _Pending:
    """A proposed revision and how to make it: ``make`` writes the new record, its id."""

    proposal: RevisionProposal
    make: Callable[[], str]

    def made(self) -> RevisionProposal:
        """The proposal, made when it is accepted (its ``to_id`` then set)."""
        if not self.proposal.accepted:
            return self.proposal
        return self.proposal.model_copy(update={"to_id": self.make()})


def _orientation_revisions(
    store: Store, campaign_id: str, outcomes: list[OrientationOutcome]
) -> list[_Pending]:
    total_exp = sum(o.experiments for o in outcomes)
    total_paid = sum(o.paid for o in outcomes)
    if total_paid == 0 or total_exp == 0:
        return []
    team_rate = (total_paid + 0.5) / (total_exp + 1)
    out: list[_Pending] = []
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
        change = f"weight {latest.weight:g} -> {new:g}"

        proposal = RevisionProposal(
            kind="orientation",
            name=latest.name,
            change=change,
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
            else f"only {o.experiments} experiments under it (a revision needs {MIN_EXPERIMENTS})",
            from_id=latest.id,
        )
        out.append(_Pending(proposal, _reweigh(store, campaign_id, latest, new, change)))
    return out


def _reweigh(
    store: Store, campaign_id: str, latest: Orientation, weight: float, change: str
) -> Callable[[], str]:
    """How to make an orientation revision: ``latest``'s text at ``weight``."""

    def make() -> str:
        return revise_orientation(
            store,
            latest.name,
            latest.text,
            actor=REVIEWER,
            role=Role.CONTROLLER,
            reason=f"review of {campaign_id}: {change}",
            weight=weight,
        ).id

    return make


def _skill_revisions(store: Store, rec: _Records) -> list[_Pending]:
    """The ``builtin:verify-gain`` skill's fresh seeds, from how the controller judged the
    campaign's verified proposals (those made from a verify direction's re-runs)."""
    skill = ensure_builtin_skills(store, actor=REVIEWER)
    verify_dirs = {
        d.id
        for d in store.query_as(Direction, campaign_id=rec.campaign_id)
        if any(e.relation == EdgeRelation.VERIFY for e in d.parents)
    }
    by_id = {e.id: e for e in rec.experiments}
    verified = [
        c
        for exp_id, c in rec.candidates.items()
        if exp_id in by_id and by_id[exp_id].direction_id in verify_dirs
    ]
    accepted = sum(1 for c in verified if c.state is CandidateState.ACCEPTED)
    rejected = sum(1 for c in verified if c.state is CandidateState.REJECTED)
    current = fresh_seeds(skill)
    found = seeds_revision(current, accepted, rejected)
    if found is None:
        return []
    new, why = found
    enough = accepted + rejected >= MIN_JUDGED
    change = f"fresh_seeds {current} -> {new}"

    def make() -> str:
        return revise_skill(
            store,
            skill.name,
            skill.text,
            verify_code(new),
            actor=REVIEWER,
            role=Role.CONTROLLER,
            reason=f"review of {rec.campaign_id}: {change}",
        ).id

    proposal = RevisionProposal(
        kind="skill",
        name=skill.name,
        change=change,
        reason=why,
        evidence=[c.id for c in verified][:50],
        accepted=enough,
        why_not=""
        if enough
        else f"only {accepted + rejected} verified proposals judged "
        f"(a revision needs {MIN_JUDGED})",
        from_id=skill.id,
    )
    return [_Pending(proposal, make)]


def _knowledge_revisions(
    store: Store,
    task: Task,
    campaign_id: str,
    own: list[Finding],
    outcomes: list[FindingOutcome],
    door: Door,
) -> list[_Pending]:
    """Knowledge to open again (see the module docstring); ``own``: the campaign's findings,
    oldest first. Each is made as an unresolved finding that supersedes it, published on
    ``door``."""
    space = task.search_space
    current = {f.id: f for f in store.query_as(Finding, fields={"task": task.name})}
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
                    f"{campaign_id}; none set a new best or became an accepted version",
                    evidence=o.adopting_experiments[:50],
                    accepted=True,
                    from_id=o.finding_id,
                )
            )
    named = {p.from_id for p in out}
    mine = {}
    for f in own:  # the campaign's latest settled finding per knob
        for tag in f.tags:
            parsed = parse_effect_tag(tag, space)
            if parsed is not None and f.status is FindingStatus.SUPPORTED and f.id in live:
                mine[parsed[0].name] = (f, parsed[1])
    for fid, f in live.items():
        if f.origin_campaign_id == campaign_id or fid in named:
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
                        reason=f"{fid} says {tag!r}; {ours.id} of {campaign_id} says "
                        f"{verb} {parsed[0].name!r}: the effect depends on conditions the "
                        "records do not separate",
                        evidence=[fid, ours.id],
                        accepted=True,
                        from_id=fid,
                    )
                )
    return [_Pending(p, _reopen(store, campaign_id, door, p, live[p.name])) for p in out]


def _reopen(
    store: Store, campaign_id: str, door: Door, p: RevisionProposal, old: Finding
) -> Callable[[], str]:
    """How to make knowledge revision ``p``: an unresolved finding superseding ``old``."""
    why = (
        "the records it cites hold both sides"
        if "conflict" in p.change
        else "the experiments it cites followed it and none set a new best or became an "
        "accepted version"
    )

    def make() -> str:
        answer = door.for_actor(REVIEWER).reviewer(
            "publish_finding",
            claim=f"Open again: {old.claim}",
            status="unresolved",
            conditions=f"review of team campaign {campaign_id}",
            uncertainty=f"superseded by the campaign review: {why}",
            sources=p.evidence[:50],
            tags=old.tags,
            supersedes=old.id,
        )
        return str(answer["id"])

    return make


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
