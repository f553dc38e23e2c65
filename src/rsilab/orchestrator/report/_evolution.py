"""An evolution's round report: per round, the version, final-tier scores and their change
against the round-0 start, acceptance and resources, and how the improver's own score moved.

Read from the store only. Scores are the controller's final-tier scores; changes are paired
by sample with the controller's interval (:func:`~rsilab.orchestrator.report._outcomes.gains_over`).
"""

from __future__ import annotations

from pydantic import Field

from rsilab.orchestrator.report._build import task_benchmarks
from rsilab.orchestrator.report._markdown import _gain, _iv, _table, _time
from rsilab.orchestrator.report._model import REPORT_VERSION, BenchmarkInfo
from rsilab.orchestrator.report._outcomes import gains_over
from rsilab.records import Evolution, Experiment, Interval, Model, SystemVersion, utc_now
from rsilab.store import Store
from rsilab.tasks import metric_order

RUNNER_HAS_NO_SCORE = (
    "The improver is one of rsilab's runners, not a system of this lineage: it has no score "
    "of its own here."
)


class RoundRow(Model):
    """One row of the table: round 0 is the start, each later one a round that ended."""

    round: int = Field(description="Round number; 0 is the start.")
    campaign_id: str | None = Field(default=None, description="The round's campaign.")
    improver: str = Field(default="", description="Who improved ('' for round 0).")
    version_id: str = Field(description="The lineage head after the round.")
    label: str = Field(description="Its H{i}/M{j}.")
    scores: dict[str, Interval] = Field(description="Its final-tier score per benchmark.")
    change: dict[str, Interval | None] = Field(
        default_factory=dict,
        description="Paired final-tier change against the round-0 start (raw units).",
    )
    accepted: bool | None = Field(default=None, description="Moved the head (None: round 0).")
    state: str = Field(default="", description="The round's campaign's state.")
    experiments: int = Field(default=0, description="Experiments of the round's campaign.")
    tool_calls: int = Field(default=0, description="Tool calls by agent roles in the round.")
    hours: float = Field(default=0.0, description="Wall hours the round took.")


class ImproverRow(Model):
    """The improver of one round and its own final-tier scores, where it is a system."""

    round: int = Field(description="Round number.")
    improver: str = Field(description="Who improved.")
    version_id: str | None = Field(description="The version whose harness acted, if one did.")
    label: str | None = Field(description="Its H{i}/M{j}.")
    scores: dict[str, Interval] = Field(
        default_factory=dict, description="Its final-tier score per target benchmark."
    )
    change: dict[str, Interval | None] = Field(
        default_factory=dict, description="Paired change against round 1's improver."
    )


class EvolutionReport(Model):
    """Everything the round report shows about one evolution."""

    report_version: int = Field(default=REPORT_VERSION, description="Shape of this report.")
    generated_at: str = Field(description="When the report was made, ISO-8601 UTC.")
    evolution: Evolution = Field(description="The evolution record.")
    benchmarks: list[BenchmarkInfo] = Field(
        default_factory=list, description="The task's benchmarks (empty if not loadable here)."
    )
    rows: list[RoundRow] = Field(description="Round 0 (the start), then each ended round.")
    improvers: list[ImproverRow] = Field(description="Each round's improver and its score.")


def build_evolution_report(store: Store, evolution_id: str) -> EvolutionReport:
    """The round report of ``evolution_id`` as the store holds it now.

    Raises:
        NotFoundError: there is no such evolution.
    """
    evolution = store.get_as(evolution_id, Evolution)
    start = store.get_as(evolution.start_version_id, SystemVersion)
    benchmarks = task_benchmarks(evolution.task)
    targets = {b.name for b in benchmarks if b.target} or set(start.scores)
    rows = [RoundRow(round=0, version_id=start.id, label=start.label, scores=start.scores)]
    improvers: list[ImproverRow] = []
    first: SystemVersion | None = None
    for entry in evolution.rounds:
        head = store.get_as(entry.head_after, SystemVersion)
        rows.append(
            RoundRow(
                round=entry.round,
                campaign_id=entry.campaign_id,
                improver=entry.improver,
                version_id=head.id,
                label=head.label,
                scores=dict(sorted(head.scores.items())),
                change=gains_over(store, head, start),
                accepted=entry.accepted,
                state=entry.state,
                experiments=len(store.query_as(Experiment, campaign_id=entry.campaign_id)),
                tool_calls=entry.tool_calls,
                hours=entry.wall_s / 3600,
            )
        )
        acting = (
            None
            if entry.improver_version_id is None
            else store.get_as(entry.improver_version_id, SystemVersion)
        )
        first = first or acting
        improvers.append(_improver_row(store, entry.round, entry.improver, acting, first, targets))
    return EvolutionReport(
        generated_at=utc_now(),
        evolution=evolution,
        benchmarks=benchmarks,
        rows=rows,
        improvers=improvers,
    )


def _improver_row(
    store: Store,
    number: int,
    improver: str,
    acting: SystemVersion | None,
    first: SystemVersion | None,
    targets: set[str],
) -> ImproverRow:
    if acting is None:
        return ImproverRow(round=number, improver=improver, version_id=None, label=None)
    change = gains_over(store, acting, first)
    return ImproverRow(
        round=number,
        improver=improver,
        version_id=acting.id,
        label=acting.label,
        scores={k: v for k, v in sorted(acting.scores.items()) if k in targets},
        change={k: v for k, v in change.items() if k in targets},
    )


# -- Markdown ----------------------------------------------------------------------------------


def render_evolution_markdown(report: EvolutionReport) -> str:
    """The round report as one Markdown document (ends with a newline)."""
    parts = [_header(report), _rounds(report), _improvers(report)]
    return "\n\n".join(p.rstrip() for p in parts) + "\n"


def _header(r: EvolutionReport) -> str:
    e = r.evolution
    ended = f": {e.message}" if e.message else ""
    return "\n".join(
        [
            f"# Evolution report: {e.id}",
            "",
            f"Task **{e.task}** (lineage `{e.lineage}`), improver **{e.improver}**, "
            f"{len(e.rounds)} of {e.rounds_planned} rounds, state **{e.state}**{ended}. "
            f"Each round's budget: {e.budget}; seed {e.seed}. Started {_time(e.created_at)}.",
            f"Report made {_time(r.generated_at)}; every number is read from the lab.",
        ]
    )


def _rounds(r: EvolutionReport) -> str:
    names = metric_order(r.rows[0].scores, r.benchmarks)
    head = ["round", "improver", "version", *(_name(r, b) for b in names)]
    head += ["accepted", "experiments", "tool calls", "hours"]
    rows = []
    for row in r.rows:
        cells = [str(row.round), row.improver or "-", f"{row.label} `{row.version_id}`"]
        cells += [_score(row.scores.get(b), row.change.get(b), row.round > 0) for b in names]
        if row.round == 0:
            cells += ["start", "-", "-", "-"]
        else:
            verdict = "accepted" if row.accepted else "kept"
            if row.state != "finished":
                verdict += f" ({row.state})"
            cells += [verdict, str(row.experiments), str(row.tool_calls), f"{row.hours:.3f}"]
        rows.append(cells)
    start = r.rows[0]
    return "\n".join(
        [
            "## Rounds",
            "",
            "Final-tier scores (private, controller-evaluated; 95% intervals) of the lineage "
            "head after each round, and in brackets after them the paired change against the "
            f"round-0 start {start.label} `{start.version_id}`.",
            "",
            _table(head, rows),
        ]
    )


def _improvers(r: EvolutionReport) -> str:
    lines = ["## The improver's own score", ""]
    if not r.improvers:
        return "\n".join([*lines, "No round has ended yet."])
    if all(i.version_id is None for i in r.improvers):
        lines.append(RUNNER_HAS_NO_SCORE)
        return "\n".join(lines)
    targets = metric_order({b for i in r.improvers for b in i.scores}, r.benchmarks)
    rows = [
        [
            str(i.round),
            i.improver,
            f"{i.label} `{i.version_id}`" if i.version_id else "-",
            *(_score(i.scores.get(b), i.change.get(b), n > 0) for b in targets),
        ]
        for n, i in enumerate(r.improvers)
    ]
    lines += [
        "The version whose harness acted as the improver in each round, with its final-tier "
        "target scores and in brackets their paired change against round 1's improver. Under "
        "self the improver is the head each round starts from, so where the system is itself "
        "an improver its score is that head's.",
        "",
        _table(["round", "improver", "version", *(_name(r, b) for b in targets)], rows),
    ]
    return "\n".join(lines)


def _name(r: EvolutionReport, bench: str) -> str:
    target = any(b.name == bench and b.target for b in r.benchmarks)
    return f"{bench} (target)" if target else bench


def _score(score: Interval | None, change: Interval | None, show_change: bool) -> str:
    if score is None:
        return "-"
    return _iv(score) + (f" ({_gain(change)})" if show_change else "")
