"""Page bodies about campaigns: the list, a campaign's overview, a direction, its experiments.

Each function returns the markup of a page's ``<main>`` and takes a :class:`Links`, so the
live dashboard and the one-file report share them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup

from rsilab.orchestrator.report import experiment_budget, task_benchmarks
from rsilab.records import (
    Campaign,
    Candidate,
    CandidateState,
    Experiment,
    Interval,
    SystemVersion,
)
from rsilab.stats import better
from rsilab.store import StoreReader
from rsilab.tasks import metric_order
from rsilab.web._curves import BenchmarkCurve, dev_scores
from rsilab.web._dag_svg import DagNode, dag_legend, dag_svg
from rsilab.web._links import Links
from rsilab.web._read import CampaignView
from rsilab.web._svg import Mark, Series, line_chart_svg
from rsilab.web._templates import render
from rsilab.web.progress import BaselineProgress

RECENT_EXPERIMENTS = 50
"""Experiments listed on a campaign's overview (all of them are on its experiments page)."""

EXPERIMENTS_PER_PAGE = 500
"""Rows of the live experiments page (the one-file report lists them all)."""


@dataclass(frozen=True)
class CampaignRow:
    """A campaign as the campaigns page lists it."""

    campaign: Campaign
    experiments: int
    candidates: int
    accepted: int
    best_dev: dict[str, float]
    """Per target benchmark, the best dev score of its experiments."""
    head: dict[str, Interval]
    """Per target benchmark, the final-tier score of the last version it had accepted."""

    @property
    def budget_cell(self) -> str:
        """'used of budget', or the count alone when the budget names no number."""
        budget = experiment_budget(self.campaign.settings.get("budget"))
        return f"{self.experiments} of {budget}" if budget is not None else str(self.experiments)


def campaign_rows(store: StoreReader) -> list[CampaignRow]:
    """Every campaign of the lab, newest first, with its counts and best scores."""
    rows = []
    for c in sorted(store.query_as(Campaign), key=lambda c: c.created_at, reverse=True):
        benchmarks = task_benchmarks(c.task)
        higher = {b.name: b.higher_is_better for b in benchmarks}
        targets = {b.name for b in benchmarks if b.target}
        experiments = store.query_as(Experiment, campaign_id=c.id)
        candidates = store.query_as(Candidate, campaign_id=c.id)
        accepted = [x for x in candidates if x.state == CandidateState.ACCEPTED and x.version_id]
        best: dict[str, float] = {}
        for scores in dev_scores(experiments, c.created_at).values():
            for name, score in scores.items():
                up = higher.get(name, True)
                if (not targets or name in targets) and (
                    name not in best or better(score.mean, best[name], higher_is_better=up)
                ):
                    best[name] = score.mean
        head: dict[str, Interval] = {}
        if accepted:
            version = store.get_as(str(accepted[-1].version_id), SystemVersion)
            head = {n: v for n, v in version.scores.items() if not targets or n in targets}
        shown = metric_order(best.keys() | head.keys(), benchmarks)
        best = {n: best[n] for n in shown if n in best}
        head = {n: head[n] for n in shown if n in head}
        rows.append(CampaignRow(c, len(experiments), len(candidates), len(accepted), best, head))
    return rows


def campaigns_body(rows: Sequence[CampaignRow], links: Links) -> Markup:
    """The campaigns of a lab, newest first."""
    return render("campaigns.html", rows=rows, links=links)


def campaign_nav(campaign_id: str, links: Links) -> list[tuple[str, str]]:
    """The links at the top of every page of a campaign."""
    return [
        (links.campaigns(), "Campaigns"),
        (links.campaign(campaign_id), "Overview"),
        (links.experiments(campaign_id), "Experiments"),
        (links.lineage(campaign_id), "Lineage"),
        (links.flags(campaign_id), "Flags"),
        (links.resources(campaign_id), "Resources"),
        (links.compare(campaign_id), "Compare"),
        (links.memory(), "Findings & skills"),
    ]


@dataclass(frozen=True)
class GuidanceForm:
    """The guidance form of a running campaign's overview, and what the last post did."""

    action: str
    token: str
    guided: str = ""
    error: str = ""


def overview_body(
    view: CampaignView,
    links: Links,
    *,
    guidance: GuidanceForm | None = None,
    baseline: BaselineProgress | None = None,
) -> Markup:
    """A campaign's overview: summary, the DAG, best-so-far curves, decisions, recent work;
    the guidance form when ``guidance`` is given, the baseline's progress when ``baseline``."""
    c = view.campaign
    head = view.accepted[-1] if view.accepted else None
    targets = [b.name for b in view.benchmarks if b.target]
    head_scores = head.scores if head else (view.start.scores if view.start else {})
    nodes = dag_nodes(view, links)
    return render(
        "overview.html",
        **table_context(view, links),
        unconfined=c.unconfined(),
        baseline_progress=baseline,
        head_score="; ".join(
            f"{name} {head_scores[name].value:.3f}" for name in targets if name in head_scores
        ),
        dag=Markup(dag_svg(nodes)),
        dag_legend=dag_legend(nodes),
        charts=[_charts(curve, links, c.id) for curve in view.curves],
        guidance=guidance,
        recent=view.experiments[-RECENT_EXPERIMENTS:][::-1],
    )


START_NODE = "start"
"""The DAG's node for the campaign's start version, which every root direction hangs from."""


def dag_nodes(view: CampaignView, links: Links) -> list[DagNode]:
    """The directions as DAG nodes with every relation the records hold: the DAG's own edges
    (continue, verify, branch, revise); ``builds-on`` where an experiment's parent ran in
    another direction; and ``start`` from the campaign's start version to each direction
    that has no other parent, so no direction is drawn unconnected."""
    cid = view.campaign.id
    where = {e.id: e.direction_id for e in view.experiments}
    edges: dict[str, list[tuple[str, str]]] = {
        d.id: [(p["parent_id"], p["relation"]) for p in d.parents] for d in view.directions
    }
    for e in view.experiments:
        source = where.get(e.parent_experiment_id or "")
        own = edges.get(e.direction_id)
        new = source and own is not None and source != e.direction_id
        if new and own is not None and all(pid != source for pid, _ in own):
            own.append((str(source), "builds-on"))
    known = set(edges)
    nodes = []
    for d in view.directions:
        parents = [(pid, rel) for pid, rel in edges[d.id] if pid in known and pid != d.id]
        nodes.append(
            DagNode(
                id=d.id,
                title=d.title,
                state=d.state,
                experiments=d.experiments,
                parents=tuple(parents) or ((START_NODE, "start"),),
                href=links.direction(cid, d.id),
            )
        )
    if not nodes:
        return []
    label = view.start.label if view.start else "start"
    start = DagNode(START_NODE, f"{label}: the start version", "start", 0, (), links.lineage(cid))
    return [start, *nodes]


@dataclass(frozen=True)
class _Charts:
    benchmark: str
    direction: str
    by_experiment: Markup
    by_time: Markup


def _charts(curve: BenchmarkCurve, links: Links, campaign_id: str) -> _Charts:
    marks_x = [
        Mark(
            x=float(p.ordinal),
            y=p.dev_score,
            label=f"{p.label} accepted (experiment {p.experiment_id})",
            href=links.experiment(campaign_id, p.experiment_id)
            if p.experiment_id and links.shows_experiment(p.experiment_id)
            else "",
        )
        for p in curve.accepted
        if p.ordinal is not None and p.dev_score is not None
    ]
    by_exp = line_chart_svg(
        [Series(curve.benchmark, tuple(curve.best_so_far(curve.by_experiment)))],
        marks=marks_x,
        scatter=curve.by_experiment,
        x_label="experiments",
        y_label=f"{curve.benchmark} dev",
        x_integer=True,
    )
    best_t = curve.best_so_far(curve.by_time)
    marks_t = [
        Mark(x=p.seconds, y=_best_at(best_t, p.seconds), label=f"{p.label} accepted")
        for p in curve.accepted
        if p.seconds is not None and best_t
    ]
    last_mark = max((m.x for m in marks_t), default=None)
    if best_t and last_mark is not None and last_mark > best_t[-1][0]:
        # the best so far holds until the last acceptance drawn: the line reaches its mark
        best_t.append((last_mark, best_t[-1][1]))
    by_time = line_chart_svg(
        [Series(curve.benchmark, tuple(best_t))],
        marks=marks_t,
        scatter=curve.by_time,
        x_label="time since start",
        y_label=f"{curve.benchmark} dev",
        x_is_seconds=True,
    )
    direction = "higher is better" if curve.higher_is_better else "lower is better"
    # _svg escapes every text it draws: its output goes in as markup
    return _Charts(curve.benchmark, direction, Markup(by_exp), Markup(by_time))


def _best_at(points: Sequence[tuple[float, float]], x: float) -> float:
    """The best-so-far value at ``x`` (the first point's before it)."""
    value = points[0][1]
    for px, py in points:
        if px > x:
            break
        value = py
    return value


def table_context(view: CampaignView, links: Links) -> dict[str, object]:
    """What ``experiments_table.html`` needs besides its rows: the campaign, direction titles,
    each experiment's place and the benchmark columns."""
    names = [b.name for b in view.benchmarks] or view.order(
        {b for scores in view.dev.values() for b in scores}
    )
    return {
        "view": view,
        "links": links,
        "cid": view.campaign.id,
        "titles": {d.id: d.title for d in view.directions},
        "ordinal": view.experiment_ordinal(),
        "names": names,
    }


def direction_body(view: CampaignView, direction_id: str, links: Links) -> Markup | None:
    """A direction's hypothesis, state history, reviews and experiments; None if unknown."""
    found = next((d for d in view.directions if d.id == direction_id), None)
    if found is None:
        return None
    exps = [e for e in view.experiments if e.direction_id == direction_id]
    return render("direction.html", **table_context(view, links), found=found, experiments=exps)


def experiments_body(view: CampaignView, links: Links, page: int = 1) -> Markup:
    """The campaign's experiments in order: all of them in the one-file report, else page
    ``page`` (from 1) of :data:`EXPERIMENTS_PER_PAGE`, with links to the pages around it."""
    total = len(view.experiments)
    steps: list[tuple[str, str]] = []
    if links.static:
        shown, title = view.experiments, f"{total} experiments"
    else:
        pages = max(1, -(-total // EXPERIMENTS_PER_PAGE))
        page = min(max(page, 1), pages)
        start = (page - 1) * EXPERIMENTS_PER_PAGE
        shown = view.experiments[start : start + EXPERIMENTS_PER_PAGE]
        title = f"{total} experiments" + (
            f": {start + 1} to {start + len(shown)} (page {page} of {pages})" if pages > 1 else ""
        )
        base = links.experiments(view.campaign.id)
        steps = [
            (f"{base}?page={n}", label)
            for n, label in ((page - 1, "previous page"), (page + 1, "next page"))
            if 1 <= n <= pages
        ]
    return render(
        "experiments.html",
        **table_context(view, links),
        experiments=shown,
        title=title,
        steps=steps,
    )
