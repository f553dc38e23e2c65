"""A :class:`CampaignReport` as Markdown, for people: plain text that reads well unrendered.

Sections come in a fixed order: summary (scores before and after), research DAG with its
evidence, a team campaign's assignments, accepted versions, rejected candidates, protocol flags
by stage, resources (by job kind, and per actor with totals), lock-in and review measures.
Intervals read ``value [low, high]`` at the level the report states.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rsilab.orchestrator.report._model import (
    AcceptedReport,
    ActorUse,
    CampaignReport,
    DirectionReport,
    RejectedReport,
    VersionScores,
)
from rsilab.records import CampaignReview, Interval, unconfined_note
from rsilab.tasks import metric_order


def render_markdown(report: CampaignReport) -> str:
    """The whole report as one Markdown document (ends with a newline)."""
    parts = [
        _header(report),
        _summary(report),
        _dag(report),
        *([_team(report)] if report.team else []),
        *([_review(report.review)] if report.review is not None else []),
        _accepted(report),
        _rejected(report.rejected, report.pending),
        _flags(report),
        _resources(report),
        _measures(report),
    ]
    return "\n\n".join(p.rstrip() for p in parts) + "\n"


# -- sections ------------------------------------------------------------------------------


def _header(r: CampaignReport) -> str:
    c = r.campaign
    settings = ", ".join(f"{k}={v}" for k, v in sorted(c.settings.items())) or "none recorded"
    lines = [
        f"# Campaign report: {c.id}",
        "",
        f"Task **{c.task}** (lineage `{c.lineage}`), state **{c.state}**, started "
        f"{_time(c.created_at)}. Settings: {settings}.",
    ]
    if c.end_reason is not None:
        lines.append(f"Ended: **{c.end_reason}** ({_flat(c.end_detail) or 'no detail'}).")
    unconfined = unconfined_note(c.settings)
    if unconfined is not None:
        lines += ["", f"> **Unsandboxed:** {unconfined}.", ""]
    if c.notes:
        lines.append(f"Notes: {_flat(c.notes)}")
    lines.append(f"Report made {_time(r.generated_at)}; every number is read from the lab.")
    return "\n".join(lines)


def _summary(r: CampaignReport) -> str:
    c = r.campaign
    not_accepted = len(r.rejected)
    failed = sum(g.count for g in r.failures)
    lines = [
        "## Summary",
        "",
        f"- Experiments: {c.experiments}"
        + (f" of {c.experiment_budget} in the budget" if c.experiment_budget is not None else "")
        + (f", {failed} failed or cancelled" if failed else ""),
        f"- Candidates: {c.candidates} proposed, {c.accepted} accepted, {not_accepted} not "
        f"accepted, {len(r.pending)} pending",
        f"- Protocol flags: {r.flags.total}",
        f"- Active wall time: {_duration(r.resources.wall_s)}; job CPU time: "
        f"{_duration(r.resources.cpu_s)}",
    ]
    if r.failures:
        rows = [[g.reason, str(g.count), f"`{g.example_experiment_id}`"] for g in r.failures]
        head = ["reason", "experiments", "e.g."]
        lines += ["", "Why experiments failed:", "", _table(head, rows)]
    if r.start is None:
        lines += ["", "The lineage has no baseline in this lab: no scores to compare."]
        return "\n".join(lines)
    after = r.accepted[-1] if r.accepted else None
    lines += [
        "",
        f"Final-tier scores (private, controller-evaluated; 95% intervals). Before: "
        f"{r.start.label} `{r.start.id}`; after: "
        + (f"{after.label} `{after.version_id}`." if after else "unchanged (nothing accepted)."),
        "",
    ]
    rows = []
    for bench in metric_order(r.start.scores, r.benchmarks):
        gain = after.vs_baseline.get(bench) if after else None
        rows.append(
            [
                _bench(r, bench),
                _iv(r.start.scores[bench]),
                _iv(after.scores[bench]) if after and bench in after.scores else "-",
                _gain(gain),
            ]
        )
    lines.append(_table(["benchmark", "before", "after", "after - baseline"], rows))
    return "\n".join(lines)


def _dag(r: CampaignReport) -> str:
    if not r.directions:
        return "## Research DAG\n\nNo directions yet."
    rows = [
        [
            f"`{d.id}`",
            d.title,
            d.state,
            f"{d.experiments} ({d.succeeded} ok, {d.failed} failed)",
            _best_dev(r, d) or "-",
            _verdicts(d),
            d.conclusion or "-",
        ]
        for d in r.directions
    ]
    head = ["direction", "title", "state", "experiments", "best dev", "reviews", "conclusion"]
    lines = ["## Research DAG", "", "```text", r.dag_text, "```", "", _table(head, rows)]
    evidence = [_evidence(d) for d in r.directions if d.reviews]
    if evidence:
        lines += ["", "### Evidence (reviews)", "", *evidence]
    return "\n".join(lines)


def _evidence(d: DirectionReport) -> str:
    lines = [f"**{d.title}** (`{d.id}`, {d.state}): {_flat(d.hypothesis)}", ""]
    for review in d.reviews:
        effects = "; ".join(f"{m} {_gain(e)}" for m, e in review.effects.items())
        lines.append(
            f"- `{review.id}` {review.verdict}, advice {review.recommendation}: "
            f"{_flat(review.rationale) or '(no rationale)'}"
            + (f" Effects: {effects}." if effects else "")
        )
    return "\n".join(lines) + "\n"


def _accepted(r: CampaignReport) -> str:
    lines = ["## Accepted versions", ""]
    if r.baseline is not None:
        lines.append(f"Baseline: {_version_line(r, r.baseline)}")
    if r.start is not None and r.baseline is not None and r.start.id != r.baseline.id:
        lines.append(f"Started from: {_version_line(r, r.start)}")
    if not r.accepted:
        lines += ["", "None: no candidate of this campaign was accepted."]
        return "\n".join(lines)
    rows = [row for a in r.accepted for row in _accepted_rows(r, a)]
    head = ["version", "candidate", "benchmark", "score", "vs baseline"]
    lines += ["", _table(head, rows), "", "Decisions (accept tier, against the version replaced):"]
    lines += [f"- {a.label} `{a.version_id}`: {_flat(a.decision)}" for a in r.accepted]
    return "\n".join(lines)


def _accepted_rows(r: CampaignReport, a: AcceptedReport) -> list[list[str]]:
    return [
        [
            f"{a.label} `{a.version_id}`" if i == 0 else "",
            f"`{a.candidate_id}`" if i == 0 else "",
            _bench(r, bench),
            _iv(a.scores[bench]),
            _gain(a.vs_baseline.get(bench)),
        ]
        for i, bench in enumerate(metric_order(a.scores, r.benchmarks))
    ]


def _rejected(rejected: Sequence[RejectedReport], pending: Sequence[str]) -> str:
    lines = ["## Rejected candidates", ""]
    if not rejected:
        lines.append("None.")
    else:
        rows = [
            [
                f"`{c.candidate_id}`",
                c.state,
                str(c.proposal_index),
                _code(c.experiment_id),
                c.reason,
            ]
            for c in rejected
        ]
        lines.append(_table(["candidate", "state", "proposal", "experiment", "reason"], rows))
    if pending:
        lines += ["", "Not decided yet: " + ", ".join(f"`{p}`" for p in pending)]
    return "\n".join(lines)


def _flags(r: CampaignReport) -> str:
    rows = [
        [
            stage,
            str(s.count),
            str(s.blocked),
            str(s.detected),
            ", ".join(f"{rule} x{n}" for rule, n in s.rules.items()) or "-",
        ]
        for stage, s in r.flags.by_stage.items()
    ]
    lines = [
        "## Protocol flags by stage",
        "",
        _table(["stage", "flags", "blocked", "detected", "rules"], rows),
    ]
    if r.flags.items:
        lines.append("")
        lines += [
            f"- `{f.id}` {f.stage}/{f.rule} by {f.actor or '-'} "
            f"({'blocked' if f.blocked else 'detected'}): {_flat(f.detail)}"
            for f in r.flags.items
        ]
    return "\n".join(lines)


def _resources(r: CampaignReport) -> str:
    res = r.resources
    rows = [
        [kind, str(u.count), f"{u.cpu_s:.1f}", f"{u.wall_s:.1f}", f"{u.peak_rss_mb:.0f}"]
        for kind, u in res.jobs.items()
    ]
    llm = res.llm
    money = f"{llm.cost_usd:.4f} USD"
    if llm.unpriced_calls:
        money += f" ({llm.unpriced_calls} calls without a known price are not in it)"
    lines = [
        "## Resources",
        "",
        f"- Active wall time: {_duration(res.wall_s)} over {res.runs} run(s)",
        f"- Job CPU time: {_duration(res.cpu_s)}",
        f"- LLM: {llm.calls} calls, {llm.tokens_in} tokens in, {llm.tokens_out} tokens out; "
        f"cost {money if llm.calls else '-'}",
    ]
    if rows:
        head = ["job kind", "jobs", "CPU s", "wall s", "peak RSS MiB"]
        lines += ["", _table(head, rows)]
    if res.by_actor:
        lines += ["", "### By actor", "", _actors(res.by_actor, res.totals)]
    return "\n".join(lines)


def _actors(rows: Sequence[ActorUse], total: ActorUse | None) -> str:
    head = ["actor", "experiments", "job CPU s", "job wall s", "LLM calls", "tokens"]
    head += ["cost USD", "tool calls", "findings", "adoptions", "assignments", "candidates"]
    head += ["accepted"]
    shown = [*rows, *([total] if total is not None else [])]
    return _table(
        head,
        [
            [
                f"{r.actor} ({r.orientation})" if r.orientation else r.actor,
                str(r.experiments),
                f"{r.job_cpu_s:.1f}",
                f"{r.job_wall_s:.1f}",
                str(r.llm_calls),
                str(r.tokens_in + r.tokens_out),
                f"{r.cost_usd:.4f}",
                str(r.tool_calls),
                str(r.findings),
                str(r.adoptions),
                str(r.assignments),
                str(r.candidates),
                str(r.accepted),
            ]
            for r in shown
        ],
    )


def _team(r: CampaignReport) -> str:
    rows = [
        [
            _time(a.at),
            a.researcher,
            a.orientation + (f" v{a.orientation_version}" if a.orientation_version else ""),
            _code(a.supersedes),
            a.reason,
            ", ".join(f"`{e}`" for e in a.evidence) or "-",
        ]
        for a in r.team
    ]
    head = ["at", "researcher", "orientation", "supersedes", "reason", "evidence"]
    intro = "The Leader's assignments, oldest first (a redirect supersedes the last one)."
    return "\n".join(["## Team", "", intro, "", _table(head, rows)])


def _review(review: CampaignReview) -> str:
    """The campaign review: what each orientation and finding led to, and the revisions."""
    orientations = _table(
        ["orientation", "researchers", "experiments", "new bests", "best gain",
         "supported findings", "accepted / candidates", "paid", "job CPU s"],
        [
            [o.orientation, ", ".join(o.researchers), str(o.experiments), str(o.new_bests),
             _signed(o.best_gain), str(o.supported_findings), f"{o.accepted} / {o.candidates}",
             str(o.paid), f"{o.cpu_s:.1f}"]
            for o in review.orientations
        ],
    )  # fmt: skip
    parts = ["## Campaign review", "", f"`{review.id}`: {review.conclusion}", "", orientations]
    if review.findings:
        rows = [
            [_code(f.finding_id), f.status, str(f.adoptions), str(len(f.adopting_experiments)),
             str(f.paid), f.verdict]
            for f in review.findings
        ]  # fmt: skip
        head = ["finding", "status", "adoptions", "experiments following it", "paid", "verdict"]
        parts += ["", _table(head, rows)]
    if review.revisions:
        rows = [
            [p.kind, _code(p.name), p.change, "made" if p.accepted else f"not made: {p.why_not}",
             _code(p.to_id), p.reason]
            for p in review.revisions
        ]  # fmt: skip
        parts += ["", _table(["revises", "what", "change", "", "new record", "why"], rows)]
    else:
        parts += ["", "No revision proposed."]
    return "\n".join(parts)


def _measures(r: CampaignReport) -> str:
    m = r.measures
    share = f"{m.top_direction_share:.2f}" if m.top_direction_share is not None else "-"
    influence = f"{m.review_influence:.2f}" if m.review_influence is not None else "-"
    rows = [
        ["directions created", str(m.directions)],
        ["directions with experiments", str(m.directions_explored)],
        [
            "share of experiments in the most-used direction",
            f"{share} ({_code(m.top_direction_id)})",
        ],
        ["branches", str(m.branches)],
        ["revisions", str(m.revisions)],
        ["verifications", str(m.verifications)],
        ["experiments since the last improvement", str(m.experiments_since_improvement)],
        ["reviews", str(m.reviews)],
        ["reviews acted on / followed", f"{m.reviews_acted_on} / {m.reviews_followed}"],
        ["review influence (followed / acted on)", influence],
    ]
    if m.reviews_stating_default:
        rows.append(
            [
                "followed reviews that changed Main's own next move",
                f"{m.reviews_changing_action} of {m.reviews_stating_default}",
            ]
        )
    return "\n".join(["## Lock-in and review measures", "", _table(["measure", "value"], rows)])


# -- helpers -------------------------------------------------------------------------------


def _table(head: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return _flat(text).replace("|", "\\|") or " "


def _flat(text: str) -> str:
    return " ".join(text.split())


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.4f}"


def _code(value: str | None) -> str:
    return f"`{value}`" if value else "-"


def _iv(score: Interval) -> str:
    return f"{score.value:.4f} [{score.low:.4f}, {score.high:.4f}]"


def _gain(gain: Interval | None) -> str:
    if gain is None:
        return "-"
    return f"{gain.value:+.4f} [{gain.low:+.4f}, {gain.high:+.4f}]"


def _bench(r: CampaignReport, name: str) -> str:
    for b in r.benchmarks:
        if b.name == name:
            side = "higher" if b.higher_is_better else "lower"
            return f"{name} ({'target, ' if b.target else ''}{side} is better)"
    return name


def _best_dev(r: CampaignReport, d: DirectionReport) -> str:
    order = metric_order(d.best_dev, r.benchmarks)
    return ", ".join(f"{b} {d.best_dev[b].score:.4f}" for b in order)


def _verdicts(d: DirectionReport) -> str:
    return ", ".join(f"{rv.verdict}->{rv.recommendation}" for rv in d.reviews) or "-"


def _version_line(r: CampaignReport, v: VersionScores) -> str:
    scores = ", ".join(f"{b} {_iv(v.scores[b])}" for b in metric_order(v.scores, r.benchmarks))
    return f"{v.label} `{v.id}`: {scores or 'no scores'}"


def _time(stamp: str) -> str:
    return stamp[:19].replace("T", " ") + " UTC"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
