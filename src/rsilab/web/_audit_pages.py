"""Page bodies that audit a campaign: the lineage and its decisions, protocol flags by stage,
and resource use per role and researcher."""

from __future__ import annotations

import re
from dataclasses import dataclass

from markupsafe import Markup

from rsilab.orchestrator.report import ActorUse, ResourcesReport
from rsilab.records import Candidate, CandidateState, Interval, SystemVersion
from rsilab.web._format import DASH
from rsilab.web._links import Links
from rsilab.web._read import CampaignView
from rsilab.web._templates import render

_VERDICTS = re.compile(r"^(?P<head>\w+ \([^)]*paired seeds\)): .*: (?:pass|fail)(?P<tail>.*)$")
"""The controller's decision text: a head, then a clause per benchmark ending in pass or fail
(shown in their own column), then any note."""


def reason_without_verdicts(reason: str) -> str:
    """A decision's reason without its per-benchmark clauses, which the lineage page shows in
    their own column: 'accepted (alpha_j=..., look 3, 12 paired seeds)' and any note after
    the clauses. Any other reason is returned whole."""
    found = _VERDICTS.match(reason)
    if found is None:
        return reason
    tail = found["tail"].strip(" ;")
    return found["head"] + (f"; {tail}" if tail else "")


@dataclass(frozen=True)
class _VersionRow:
    label: str
    id: str
    created_at: str
    parent: str
    source: str
    decision: str


@dataclass(frozen=True)
class _Cell:
    score: Interval | None
    change: float | None = None
    cls: str = "ns"


@dataclass(frozen=True)
class _CandidateRow:
    candidate: Candidate
    made: str
    reason: str


def lineage_body(view: CampaignView, links: Links) -> Markup:
    """The lineage's versions, the regression table across every benchmark, and every
    candidate of the campaign with the controller's decision per benchmark (once: the reason
    column holds what the per-benchmark column does not)."""
    names = [b.name for b in view.benchmarks] or view.order(
        {n for v in view.versions for n in v.scores}
    )
    by_id = {v.id: v for v in view.versions}
    versions = [
        _VersionRow(
            v.label,
            v.id,
            v.created_at,
            by_id[v.parent_id].label if v.parent_id in by_id else (v.parent_id or DASH),
            v.candidate_id or ("rollback of " + v.rollback_of if v.rollback_of else DASH),
            reason_without_verdicts(v.decision) if v.decision else DASH,
        )
        for v in view.versions
    ]
    labels = {v.candidate_id: v.label for v in view.versions if v.candidate_id}
    candidates = [
        _CandidateRow(
            c,
            labels.get(c.id, ""),
            (reason_without_verdicts(c.reason) if c.decisions else c.reason)
            or c.public_note
            or DASH,
        )
        for c in view.candidates
    ]
    targets = {b.name for b in view.benchmarks if b.target}
    return render(
        "lineage.html",
        view=view,
        links=links,
        versions=versions,
        benchmark_headers=[f"{n} (target)" if n in targets else n for n in names],
        regressions=_regressions(view, names),
        candidates=candidates,
        pending=sum(1 for c in view.candidates if c.state == CandidateState.PENDING),
    )


def _regressions(view: CampaignView, names: list[str]) -> list[tuple[str, list[_Cell]]]:
    """Every version's final-tier score per benchmark; a cell is marked where it is worse
    than its parent's beyond both intervals (a regression) or better beyond them."""
    higher = view.higher
    by_id = {v.id: v for v in view.versions}
    rows = []
    for v in view.versions:
        parent: SystemVersion | None = by_id.get(v.parent_id or "")
        cells = []
        for n in names:
            before = parent.scores.get(n) if parent is not None else None
            cells.append(_regression_cell(v.scores.get(n), before, higher.get(n, True)))
        rows.append((v.label, cells))
    return rows


def _regression_cell(score: Interval | None, before: Interval | None, higher: bool) -> _Cell:
    if score is None or before is None:
        return _Cell(score)
    better = score.low > before.high if higher else score.high < before.low
    worse = score.high < before.low if higher else score.low > before.high
    return _Cell(score, score.value - before.value, "pos" if better else "neg" if worse else "ns")


def flags_body(view: CampaignView) -> Markup:
    """Protocol flags: counts by stage, then every flag grouped by stage."""
    return render("flags.html", view=view)


def resources_body(view: CampaignView, r: ResourcesReport) -> Markup:
    """What the campaign used: per job kind, LLM calls, and per actor with totals."""
    actors: list[tuple[str, str, ActorUse]] = [(a.actor, a.orientation, a) for a in r.by_actor]
    if r.totals is not None:
        actors.append(("total", "", r.totals))
    return render("resources.html", view=view, r=r, actors=actors)
