"""Page bodies that audit a campaign: the lineage and its decisions, protocol flags by stage,
and resource use per role and researcher."""

from __future__ import annotations

from rsilab.orchestrator.report import ActorUse, ResourcesReport
from rsilab.records import CandidateState, Interval, SystemVersion
from rsilab.web._html import (
    DASH,
    Html,
    badge,
    esc,
    interval,
    join,
    num,
    seconds,
    section,
    table,
    tag,
)
from rsilab.web._links import Links
from rsilab.web._read import CampaignView


def lineage_body(view: CampaignView, links: Links) -> Html:
    """The lineage's versions, the regression table across every benchmark, and every
    candidate of the campaign with the controller's decision per benchmark."""
    cid = view.campaign.id
    names = [b.name for b in view.benchmarks] or sorted(
        {n for v in view.versions for n in v.scores}
    )
    by_id = {v.id: v for v in view.versions}
    version_rows = [
        [
            esc(v.label),
            esc(v.id),
            esc(v.created_at[:19].replace("T", " ")),
            esc(by_id[v.parent_id].label if v.parent_id in by_id else (v.parent_id or DASH)),
            esc(v.candidate_id or ("rollback of " + v.rollback_of if v.rollback_of else DASH)),
            esc(v.decision or DASH),
        ]
        for v in view.versions
    ]
    return join(
        [
            tag("h1", esc(f"Lineage {view.lineage} of {view.campaign.task.name}")),
            section(
                "Versions",
                table(
                    ["version", "id", "created (UTC)", "parent", "from candidate", "decision"],
                    version_rows,
                    empty="the lineage has no baseline in this lab",
                ),
            ),
            section(
                "Regression table (final tier)", _regressions(view, names), ident="regressions"
            ),
            section("Candidates and decisions", _candidates(view, links, cid), ident="decisions"),
        ]
    )


def _regressions(view: CampaignView, names: list[str]) -> Html:
    """Every version's final-tier score per benchmark; a cell is marked where it is worse
    than its parent's beyond both intervals (a regression) or better beyond them."""
    higher = view.higher
    by_id = {v.id: v for v in view.versions}
    rows = []
    for v in view.versions:
        parent: SystemVersion | None = by_id.get(v.parent_id or "")
        cells = []
        for n in names:
            score = v.scores.get(n)
            before = parent.scores.get(n) if parent is not None else None
            cells.append(_regression_cell(score, before, higher.get(n, True)))
        rows.append([esc(v.label), *cells])
    targets = {b.name for b in view.benchmarks if b.target}
    headers = [
        "version",
        *[f"{n} (target)" if n in targets else n for n in names],
    ]
    note = tag(
        "p",
        esc(
            "Under each score: the change from the parent version. Red: worse "
            "than the parent with the intervals apart; green: better so."
        ),
        class_="muted",
    )
    return Html(table(headers, rows, empty="no versions") + note)


def _regression_cell(score: Interval | None, before: Interval | None, higher: bool) -> Html:
    if score is None:
        return Html(DASH)
    if before is None:
        return interval(score)
    change = score.value - before.value
    better = score.low > before.high if higher else score.high < before.low
    worse = score.high < before.low if higher else score.low > before.high
    cls = "pos" if better else "neg" if worse else "ns"
    mark = tag("span", esc(f"{change:+.3f}"), class_=cls)
    return Html(f"{interval(score)}<br>{mark}")


def _candidates(view: CampaignView, links: Links, cid: str) -> Html:
    labels = {v.candidate_id: v.label for v in view.versions if v.candidate_id}
    rows = []
    for c in view.candidates:
        decisions = join(
            tag(
                "div",
                esc(
                    f"{d.benchmark}{' (target)' if d.target else ''}: gain {d.gain:+.4f} "
                    f"[{d.low:+.4f}, {d.high:+.4f}] vs {d.threshold:+.4f} "
                )
                + tag(
                    "span", esc("pass" if d.passed else "fail"), class_="pos" if d.passed else "neg"
                ),
            )
            for d in c.decisions
        )
        made = labels.get(c.id)
        rows.append(
            [
                num(c.proposal_index),
                esc(c.id),
                links.experiment_link(cid, c.experiment_id) if c.experiment_id else Html(DASH),
                esc(c.proposer or DASH),
                badge(c.state) + (esc(f" → {made}") if made else Html("")),
                esc(c.compared_to or DASH),
                decisions or Html(DASH),
                esc(c.reason or c.public_note or DASH),
            ]
        )
    pending = sum(1 for c in view.candidates if c.state == CandidateState.PENDING)
    return Html(
        table(
            [
                "#",
                "candidate",
                "experiment",
                "proposer",
                "state",
                "judged against",
                "per benchmark (accept tier)",
                "reason",
            ],
            rows,
            empty="no candidates proposed yet",
            numeric=(0,),
        )
        + (tag("p", esc(f"{pending} pending"), class_="muted") if pending else "")
    )


def flags_body(view: CampaignView) -> Html:
    """Protocol flags: counts by stage, then every flag grouped by stage."""
    f = view.flags
    stage_rows = [
        [
            esc(stage),
            num(s.count),
            num(s.blocked),
            num(s.detected),
            esc(", ".join(f"{rule} x {n}" for rule, n in sorted(s.rules.items())) or DASH),
        ]
        for stage, s in f.by_stage.items()
    ]
    parts = [
        tag("h1", esc(f"Protocol flags of {view.campaign.id}: {f.total}")),
        section(
            "By stage",
            table(
                ["stage", "flags", "blocked", "detected", "rules"], stage_rows, numeric=(1, 2, 3)
            ),
        ),
    ]
    for stage in f.by_stage:
        items = [i for i in f.items if i.stage == stage]
        if not items:
            continue
        rows = [
            [
                esc(i.at[:19].replace("T", " ")),
                esc(i.rule),
                esc(i.actor),
                badge("blocked" if i.blocked else "detected"),
                esc(i.detail),
            ]
            for i in items
        ]
        parts.append(
            section(
                f"Stage {stage} ({len(items)})",
                table(["at (UTC)", "rule", "actor", "outcome", "detail"], rows),
                ident=f"stage-{stage}",
            )
        )
    return join(parts)


def resources_body(view: CampaignView, r: ResourcesReport) -> Html:
    """What the campaign used: per job kind, LLM calls, and per actor with totals."""
    kinds = [
        [esc(kind), num(u.count), seconds(u.cpu_s), seconds(u.wall_s), esc(f"{u.peak_rss_mb:.0f}")]
        for kind, u in sorted(r.jobs.items())
    ]
    actor_rows = [_actor_row(a.actor, a.orientation, a) for a in r.by_actor]
    if r.totals is not None:
        actor_rows.append(_actor_row("total", "", r.totals))
    llm = r.llm
    return join(
        [
            tag("h1", esc(f"Resources of {view.campaign.id}")),
            section(
                "In all",
                tag(
                    "p",
                    esc(
                        f"Active wall time {r.wall_s:.1f} s over {r.runs} run(s); job CPU "
                        f"{r.cpu_s:.1f} s; LLM: {llm.calls} calls, {llm.tokens_in:,} tokens in, "
                        f"{llm.tokens_out:,} out, ${llm.cost_usd:.4f}"
                        + (
                            f" ({llm.unpriced_calls} calls without a known price)"
                            if llm.unpriced_calls
                            else ""
                        )
                    ),
                ),
            ),
            section(
                "By job kind",
                table(["kind", "jobs", "CPU", "wall", "peak MiB"], kinds, numeric=(1, 2, 3, 4)),
            ),
            section(
                "By role and researcher",
                table(
                    [
                        "actor",
                        "orientation",
                        "experiments",
                        "jobs",
                        "job CPU",
                        "LLM calls",
                        "tokens in",
                        "tokens out",
                        "cost $",
                        "tool calls",
                        "candidates",
                        "accepted",
                    ],
                    actor_rows,
                    numeric=tuple(range(2, 12)),
                ),
                ident="by-actor",
            ),
        ]
    )


def _actor_row(name: str, orientation: str, a: ActorUse) -> list[Html]:
    return [
        esc(name),
        esc(orientation or DASH),
        num(a.experiments),
        num(a.jobs),
        seconds(a.job_cpu_s),
        num(a.llm_calls),
        num(a.tokens_in),
        num(a.tokens_out),
        esc(f"{a.cost_usd:.4f}"),
        num(a.tool_calls),
        num(a.candidates),
        num(a.accepted),
    ]
