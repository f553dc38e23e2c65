"""Page bodies about campaigns: the list, a campaign's overview, a direction, its experiments.

Each function returns the markup of a page's ``<main>`` and takes a :class:`Links`, so the
live dashboard and the one-file report share them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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
from rsilab.web._curves import BenchmarkCurve, dev_scores
from rsilab.web._html import (
    DASH,
    Html,
    badge,
    cards,
    details,
    esc,
    facts,
    interval,
    join,
    link,
    num,
    pre,
    seconds,
    section,
    signed_interval,
    table,
    tag,
)
from rsilab.web._links import Links
from rsilab.web._read import CampaignView
from rsilab.web._svg import DagNode, Mark, Series, dag_svg, line_chart_svg

RECENT_EXPERIMENTS = 50
"""Experiments listed on a campaign's overview (all of them are on its experiments page)."""


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
        rows.append(CampaignRow(c, len(experiments), len(candidates), len(accepted), best, head))
    return rows


def campaigns_body(rows: Sequence[CampaignRow], links: Links) -> Html:
    """The campaigns of a lab, newest first."""
    body = [
        [
            link(links.campaign(r.campaign.id), r.campaign.id),
            esc(r.campaign.task.name),
            badge(r.campaign.state),
            esc(r.campaign.created_at[:19].replace("T", " ")),
            _budget_cell(r.campaign, r.experiments),
            num(r.candidates),
            num(r.accepted),
            esc("; ".join(f"{n} {v:.3f}" for n, v in sorted(r.best_dev.items())) or DASH),
            join(f"{esc(n)} {interval(v)}<br>" for n, v in sorted(r.head.items())) or Html(DASH),
            esc(str(r.campaign.settings.get("agents", "builtin"))),
        ]
        for r in rows
    ]
    return join(
        [
            tag("h1", "Campaigns"),
            section(
                "Campaigns of this lab",
                table(
                    [
                        "campaign",
                        "task",
                        "state",
                        "started (UTC)",
                        "experiments",
                        "candidates",
                        "accepted",
                        "best dev (target)",
                        "last accepted, final tier (target)",
                        "agents",
                    ],
                    body,
                    empty="no campaigns yet: start one with `rsilab run TASK`",
                    numeric=(5, 6),
                ),
            ),
            tag("p", link(links.memory(), "Findings and skills of the lab"), class_="muted"),
        ]
    )


def _budget_cell(campaign: Campaign, used: int) -> Html:
    budget = experiment_budget(campaign.settings.get("budget"))
    return esc(f"{used} of {budget}" if budget is not None else str(used))


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


def overview_body(view: CampaignView, links: Links, *, guidance_form: str = "") -> Html:
    """A campaign's overview: summary, the DAG, best-so-far curves, decisions, recent work."""
    c = view.campaign
    head = view.accepted[-1] if view.accepted else None
    targets = [b.name for b in view.benchmarks if b.target]
    head_scores = head.scores if head else (view.start.scores if view.start else {})
    best = "; ".join(
        f"{name} {head_scores[name].value:.3f}" for name in targets if name in head_scores
    )
    budget = f" of {view.budget}" if view.budget is not None else ""
    unconfined = c.unconfined()
    parts = [
        tag("h1", esc(f"Campaign {c.id} ") + badge(c.state)),
        *([tag("p", tag("strong", "Unsandboxed: ") + esc(unconfined + "."))] if unconfined else []),
        cards(
            [
                ("experiments", esc(f"{len(view.experiments)}{budget}")),
                ("candidates", num(len(view.candidates))),
                ("accepted", num(view.accepted_count)),
                ("protocol flags", num(view.flags.total)),
                ("experiments' job CPU", seconds(view.job_cpu_s)),
            ]
        ),
        section(
            "Summary",
            facts(
                [
                    ("task", esc(c.task.name)),
                    ("lineage", link(links.lineage(c.id), view.lineage)),
                    ("started", esc(c.created_at)),
                    ("settings", esc(", ".join(f"{k}={v}" for k, v in sorted(c.settings.items())))),
                    ("notes", esc(c.notes or DASH)),
                    ("head's final-tier target score", esc(best or DASH)),
                ]
            ),
        ),
        section("Research DAG", _dag(view, links) + _directions_table(view, links), ident="dag"),
        section("Best so far", _curves(view.curves, links, c.id), ident="curves"),
        section("Accepted versions", _accepted_table(view, links), ident="accepted"),
    ]
    if guidance_form:
        parts.append(section("Guide the Main agent", guidance_form, ident="guidance"))
    parts.append(
        section(
            f"Latest experiments ({min(RECENT_EXPERIMENTS, len(view.experiments))} of "
            f"{len(view.experiments)})",
            experiments_table(view, view.experiments[-RECENT_EXPERIMENTS:][::-1], links)
            + tag("p", link(links.experiments(c.id), "all experiments")),
            ident="recent",
        )
    )
    if view.team:
        parts.append(section("Team assignments", _team_table(view)))
    if view.review is not None:
        parts.append(section("Campaign review", pre(view.review.conclusion)))
    return join(parts)


def _dag(view: CampaignView, links: Links) -> Html:
    cid = view.campaign.id
    nodes = [
        DagNode(
            id=d.id,
            title=d.title,
            state=d.state,
            experiments=d.experiments,
            parents=tuple((p["parent_id"], p["relation"]) for p in d.parents),
            href=links.direction(cid, d.id),
        )
        for d in view.directions
    ]
    return Html(f'<div class="dag-wrap">{dag_svg(nodes)}</div>')


def _directions_table(view: CampaignView, links: Links) -> Html:
    cid = view.campaign.id
    rows = [
        [
            link(links.direction(cid, d.id), d.title),
            badge(d.state),
            num(d.experiments),
            num(d.succeeded),
            num(d.failed),
            esc("; ".join(f"{b} {best.score:.3f}" for b, best in d.best_dev.items()) or DASH),
            num(len(d.reviews)),
        ]
        for d in view.directions
    ]
    return details(
        "Directions",
        table(
            ["direction", "state", "experiments", "succeeded", "failed", "best dev", "reviews"],
            rows,
            numeric=(2, 3, 4, 6),
        ),
        open_=True,
    )


def _curves(curves: Sequence[BenchmarkCurve], links: Links, campaign_id: str) -> Html:
    if not curves:
        return tag("p", esc("no dev scores yet"), class_="empty")
    charts = []
    for curve in curves:
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
        )
        best_t = curve.best_so_far(curve.by_time)
        marks_t = [
            Mark(x=p.seconds, y=_best_at(best_t, p.seconds), label=f"{p.label} accepted")
            for p in curve.accepted
            if p.seconds is not None and best_t
        ]
        by_time = line_chart_svg(
            [Series(curve.benchmark, tuple(best_t))],
            marks=marks_t,
            scatter=curve.by_time,
            x_label="time since start",
            y_label=f"{curve.benchmark} dev",
            x_is_seconds=True,
        )
        direction = "higher is better" if curve.higher_is_better else "lower is better"
        charts.append(
            tag(
                "div",
                tag("h3", esc(f"{curve.benchmark} ({direction})")) + by_exp + by_time,
                class_="curve",
                data_benchmark=curve.benchmark,
            )
        )
    return Html('<div class="grid">' + "".join(charts) + "</div>")


def _best_at(points: Sequence[tuple[float, float]], x: float) -> float:
    """The best-so-far value at ``x`` (the first point's before it)."""
    value = points[0][1]
    for px, py in points:
        if px > x:
            break
        value = py
    return value


def _accepted_table(view: CampaignView, links: Links) -> Html:
    cid = view.campaign.id
    names = [b.name for b in view.benchmarks] or sorted(
        {n for a in view.accepted for n in a.scores}
    )
    rows = [
        [
            esc(a.label),
            links.experiment_link(cid, a.experiment_id) if a.experiment_id else Html(DASH),
            esc((a.accepted_at or "")[:19].replace("T", " ")),
            *[
                interval(a.scores.get(n))
                + Html("<br>")
                + signed_interval(a.vs_baseline.get(n), higher=view.higher.get(n, True))
                for n in names
            ],
        ]
        for a in view.accepted
    ]
    note = tag(
        "p",
        esc(
            "Final-tier scores with 95% intervals; under each, the paired difference against "
            "the baseline. Rejected candidates and the controller's reasons: "
        )
        + link(links.lineage(cid), "lineage"),
        class_="muted",
    )
    return Html(
        table(
            ["version", "from experiment", "accepted (UTC)", *names],
            rows,
            empty="no version accepted yet",
        )
        + note
    )


def experiments_table(view: CampaignView, experiments: Sequence[Experiment], links: Links) -> Html:
    """A row per experiment: id, direction, state, who, dev scores, CPU."""
    cid = view.campaign.id
    titles = {d.id: d.title for d in view.directions}
    ordinal = view.experiment_ordinal()
    names = [b.name for b in view.benchmarks] or sorted(
        {b for scores in view.dev.values() for b in scores}
    )
    rows = []
    for e in experiments:
        dev = {b: s.mean for b, s in view.dev.get(e.id, {}).items()}
        rows.append(
            [
                num(ordinal.get(e.id)),
                links.experiment_link(cid, e.id),
                link(
                    links.direction(cid, e.direction_id), titles.get(e.direction_id, e.direction_id)
                ),
                badge(e.state),
                esc(e.created_by),
                *[num(dev.get(n)) for n in names],
                seconds(e.resources.cpu_s),
                esc(e.description[:120]),
            ]
        )
    return table(
        [
            "#",
            "experiment",
            "direction",
            "state",
            "by",
            *[f"{n} dev" for n in names],
            "CPU",
            "description",
        ],
        rows,
        empty="no experiments yet",
        numeric=(0, *range(5, 6 + len(names))),
    )


def _team_table(view: CampaignView) -> Html:
    rows = [
        [esc(t.at[:19].replace("T", " ")), esc(t.researcher), esc(t.orientation), esc(t.reason)]
        for t in view.team
    ]
    return table(["at (UTC)", "researcher", "orientation", "reason"], rows)


def direction_body(view: CampaignView, direction_id: str, links: Links) -> Html | None:
    """A direction's hypothesis, state history, reviews and experiments; None if unknown."""
    found = next((d for d in view.directions if d.id == direction_id), None)
    if found is None:
        return None
    cid = view.campaign.id
    titles = {d.id: d.title for d in view.directions}
    parents = join(
        link(links.direction(cid, p["parent_id"]), titles.get(p["parent_id"], p["parent_id"]))
        + esc(f" ({p['relation']}) ")
        for p in found.parents
    )
    reviews = [
        [
            esc(rv.id),
            badge(rv.verdict),
            esc(rv.recommendation),
            esc(
                "; ".join(
                    f"{m} {e.value:+.3f} [{e.low:+.3f}, {e.high:+.3f}]"
                    for m, e in rv.effects.items()
                )
                or DASH
            ),
            esc(rv.rationale),
        ]
        for rv in found.reviews
    ]
    exps = [e for e in view.experiments if e.direction_id == direction_id]
    return join(
        [
            tag("h1", esc(f"Direction: {found.title} ") + badge(found.state)),
            section(
                "What it tests",
                facts(
                    [
                        ("id", esc(found.id)),
                        ("hypothesis", esc(found.hypothesis)),
                        ("parents", parents or Html(f"{DASH} (a root)")),
                        ("conclusion", esc(found.conclusion or DASH)),
                        (
                            "experiments",
                            esc(
                                f"{found.experiments} ({found.succeeded} succeeded, "
                                f"{found.failed} failed)"
                            ),
                        ),
                    ]
                ),
            ),
            section(
                "Reviews",
                table(
                    ["review", "verdict", "recommendation", "effects", "rationale"],
                    reviews,
                    empty="no reviews yet",
                ),
            ),
            section(f"Experiments ({len(exps)})", experiments_table(view, exps, links)),
        ]
    )


EXPERIMENTS_PER_PAGE = 500
"""Rows of the live experiments page (the one-file report lists them all)."""


def experiments_body(view: CampaignView, links: Links, page: int = 1) -> Html:
    """The campaign's experiments in order: all of them in the one-file report, else page
    ``page`` (from 1) of :data:`EXPERIMENTS_PER_PAGE`, with links to the pages around it."""
    total = len(view.experiments)
    if links.static:
        shown, title, pager = view.experiments, f"{total} experiments", Html("")
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
            link(f"{base}?page={n}", label, class_="pager")
            for n, label in ((page - 1, "previous page"), (page + 1, "next page"))
            if 1 <= n <= pages
        ]
        pager = tag("nav", join(steps), class_="sub") if steps else Html("")
    return join(
        [
            tag("h1", esc(f"Experiments of {view.campaign.id}")),
            section(title, pager + experiments_table(view, shown, links) + pager),
        ]
    )
