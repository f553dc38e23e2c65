"""Page bodies about experiments: one experiment in full, and two compared sample by sample."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rsilab.errors import NotFoundError
from rsilab.records import DataTier, Evaluation, Event, Experiment, Interval, Job
from rsilab.stats import paired_gain
from rsilab.store import StoreReader
from rsilab.store.artifacts import ArtifactStore
from rsilab.web._diff import tree_changes
from rsilab.web._html import (
    DASH,
    Html,
    badge,
    better_class,
    details,
    esc,
    facts,
    join,
    json_block,
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

LOG_TAIL_LINES = 200
"""Lines of a job's output shown (the last ones)."""

MAX_SAMPLE_ROWS = 500
"""Samples listed in a comparison, most different first."""


@dataclass
class ExperimentRecords:
    """An experiment with the records that concern it."""

    experiment: Experiment
    jobs: list[Job]
    evaluations: list[Evaluation]
    events: list[Event]


def read_experiment(store: StoreReader, experiment_id: str) -> ExperimentRecords:
    """The experiment, its jobs (controller jobs included), its dev and fold evaluations and
    every ledger event that wrote it or one of its jobs. Raises NotFoundError."""
    exp = store.get_as(experiment_id, Experiment)
    jobs = sorted(
        store.query_as(Job, fields={"experiment_id": exp.id}), key=lambda j: (j.created_at, j.id)
    )
    evaluations = store.query_as(Evaluation, fields={"subject_id": exp.id})
    seen: dict[int, Event] = {}
    for rid in [exp.id, *(j.id for j in jobs), *(e.id for e in evaluations)]:
        for event in store.events(record_id=rid):
            seen[event.seq] = event
    return ExperimentRecords(exp, jobs, evaluations, [seen[s] for s in sorted(seen)])


def experiment_body(
    view: CampaignView, found: ExperimentRecords, artifacts: ArtifactStore, links: Links
) -> Html:
    """One experiment: what it is, its config, scores, jobs with logs, resources, the diff of
    its workspace against its parent's, and its ledger events."""
    e = found.experiment
    cid = view.campaign.id
    titles = {d.id: d.title for d in view.directions}
    others = [x.id for x in view.experiments if x.id != e.id]
    parent = (
        links.experiment_link(cid, e.parent_experiment_id) if e.parent_experiment_id else Html(DASH)
    )
    candidates = [c for c in view.candidates if c.experiment_id == e.id]
    proposed = join(esc(f"{c.id} ") + badge(c.state) + Html("<br>") for c in candidates) or Html(
        DASH
    )
    compare_with = e.parent_experiment_id or (others[-1] if others else "")
    return join(
        [
            tag("h1", esc(f"Experiment {e.id} ") + badge(e.state)),
            section(
                "What it is",
                facts(
                    [
                        (
                            "direction",
                            link(
                                links.direction(cid, e.direction_id),
                                titles.get(e.direction_id, e.direction_id),
                            ),
                        ),
                        ("created by", esc(e.created_by or DASH)),
                        ("created", esc(e.created_at)),
                        ("finished", esc(e.finished_at or DASH)),
                        ("parent experiment", parent),
                        ("description", esc(e.description or DASH)),
                        ("worker's summary", esc(e.summary_text or DASH)),
                        ("candidates proposed from it", proposed),
                        (
                            "compare",
                            link(links.compare(cid, e.id, compare_with), f"with {compare_with}")
                            if compare_with and not links.static
                            else Html(DASH),
                        ),
                    ]
                ),
            ),
            section("Configuration", json_block(e.config)),
            section("Scores", _scores(found.evaluations) + _metrics(e)),
            section("Resources", _resources(e)),
            section("Jobs", _jobs(found.jobs, artifacts)),
            section("Workspace diff", _diff(view, e, artifacts, links)),
            section(f"Ledger events ({len(found.events)})", _events(found.events)),
        ]
    )


def _scores(evaluations: Sequence[Evaluation]) -> Html:
    rows = [
        [
            esc(ev.benchmark),
            esc("dev" if ev.tier == DataTier.DEV else f"{ev.tier} (out of fold)"),
            esc(ev.metric),
            num(float(np.mean([s.score for s in ev.samples])) if ev.samples else None),
            num(len({s.sample_id for s in ev.samples})),
            num(len({s.epoch for s in ev.samples})),
            esc(ev.id),
        ]
        for ev in evaluations
        if ev.tier in (DataTier.DEV, DataTier.TRAIN)
    ]
    return table(
        ["benchmark", "tier", "metric", "mean", "samples", "epochs", "evaluation"],
        rows,
        empty="not scored yet (the controller scores dev evaluations it runs)",
        numeric=(3, 4, 5),
    )


def _metrics(e: Experiment) -> Html:
    if not e.metrics:
        return Html("")
    rows = [
        [esc(m.name), num(m.value), esc(m.split), num(m.step), esc(m.source)] for m in e.metrics
    ]
    return details(
        f"Metrics logged ({len(e.metrics)})",
        table(["metric", "value", "split", "step", "source"], rows, numeric=(1, 3)),
    )


def _resources(e: Experiment) -> Html:
    r = e.resources
    return facts(
        [
            ("CPU", seconds(r.cpu_s)),
            ("wall (summed over jobs)", seconds(r.wall_s)),
            ("peak memory", esc(f"{r.peak_rss_mb:.0f} MiB")),
            ("LLM tokens", esc(f"{r.tokens_in:,} in, {r.tokens_out:,} out")),
            ("cost", esc(f"${r.cost_usd:.4f}")),
        ]
    )


def _jobs(jobs: Sequence[Job], artifacts: ArtifactStore) -> Html:
    if not jobs:
        return tag("p", esc("no jobs yet"), class_="empty")
    rows = [
        [
            esc(j.id),
            esc(j.kind),
            badge(j.status),
            esc(j.benchmark or j.fold or DASH),
            num(j.inputs.seed),
            esc(DASH if j.exit_code is None else j.exit_code),
            seconds(j.resources.cpu_s),
            seconds(j.resources.wall_s),
            esc(f"{j.resources.peak_rss_mb:.0f}"),
            esc(j.error or j.kill_reason or ""),
        ]
        for j in jobs
    ]
    logs = join(
        details(f"{j.id} ({j.kind}) {name}", _log_tail(artifacts, sha))
        for j in jobs
        for name, sha in (("stdout", j.stdout_sha256), ("stderr", j.stderr_sha256))
        if sha
    )
    return Html(
        table(
            [
                "job",
                "kind",
                "status",
                "benchmark / fold",
                "seed",
                "exit",
                "CPU",
                "wall",
                "peak MiB",
                "error",
            ],
            rows,
            numeric=(4, 6, 7, 8),
        )
        + tag("h3", esc("Logs"))
        + (logs or tag("p", esc("no logs kept"), class_="empty"))
    )


def _log_tail(artifacts: ArtifactStore, sha: str) -> Html:
    try:
        text = artifacts.read_bytes(sha).decode("utf-8", errors="replace")
    except NotFoundError:
        return tag("p", esc(f"log {sha[:12]} is no longer in the lab (collected)"), class_="empty")
    lines = text.splitlines()
    cut = len(lines) - LOG_TAIL_LINES
    head = f"… {cut} earlier lines not shown\n" if cut > 0 else ""
    return pre(head + "\n".join(lines[-LOG_TAIL_LINES:]) if lines else "(empty)")


def _diff(view: CampaignView, e: Experiment, artifacts: ArtifactStore, links: Links) -> Html:
    if e.workspace_hash is None:
        return tag(
            "p",
            esc("no workspace snapshot yet (taken when the experiment finishes)"),
            class_="empty",
        )
    base, what = _parent_tree(view, e)
    try:
        changes = tree_changes(artifacts, base, e.workspace_hash)
    except NotFoundError as exc:
        return tag("p", esc(f"a workspace snapshot is no longer in the lab: {exc}"), class_="empty")
    intro = tag("p", esc(f"Against {what}: {len(changes)} files differ."), class_="muted")
    blocks = join(
        tag("h3", esc(f"{c.path} ({c.status})"))
        + (_diff_pre(c.diff) if c.diff else tag("p", esc(c.note), class_="muted"))
        for c in changes
    )
    return Html(intro + blocks)


def _parent_tree(view: CampaignView, e: Experiment) -> tuple[str | None, str]:
    """The tree an experiment's workspace is compared with, and what it is."""
    if e.parent_experiment_id:
        parent = next((x for x in view.experiments if x.id == e.parent_experiment_id), None)
        if parent is not None and parent.workspace_hash:
            return parent.workspace_hash, f"parent experiment {parent.id}"
    start = view.start
    version = next((v for v in view.versions if start and v.id == start.id), None)
    if version is not None:
        return version.harness_sha256, f"the harness of {version.label} (the campaign's start)"
    return None, "an empty tree (no parent known)"


def _diff_pre(diff: str) -> Html:
    lines = []
    for line in diff.splitlines():
        cls = (
            "hunk"
            if line.startswith("@@")
            else "add"
            if line.startswith("+") and not line.startswith("+++")
            else "del"
            if line.startswith("-") and not line.startswith("---")
            else ""
        )
        lines.append(f'<span class="{cls}">{esc(line)}</span>' if cls else str(esc(line)))
    return Html('<pre class="diff">' + "\n".join(lines) + "</pre>")


def _events(events: Sequence[Event]) -> Html:
    rows = [
        [
            num(ev.seq),
            esc(ev.at[:19].replace("T", " ")),
            esc(ev.actor),
            esc(ev.role),
            esc(ev.action),
            esc(ev.tool or ""),
            badge(ev.outcome),
            esc(ev.detail[:200]),
        ]
        for ev in events
    ]
    return table(
        ["seq", "at (UTC)", "actor", "role", "action", "tool", "outcome", "detail"],
        rows,
        numeric=(0,),
    )


# -- comparison ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SampleComparison:
    """Two experiments' dev scores on one benchmark, paired by sample."""

    benchmark: str
    samples: list[tuple[str, float, float]]
    """(sample id, mean of a, mean of b) over the samples both scored in every epoch."""
    a_higher: int
    b_higher: int
    difference: Interval | str
    """The paired difference a - b (an Interval) or a reason it cannot be computed."""


def compare_samples(
    evals_a: Sequence[Evaluation], evals_b: Sequence[Evaluation]
) -> list[SampleComparison]:
    """Per benchmark both were dev-scored on: per-sample means and the paired difference."""
    out = []
    dev_a = [e for e in evals_a if e.tier == DataTier.DEV]
    dev_b = [e for e in evals_b if e.tier == DataTier.DEV]
    for bench in sorted({e.benchmark for e in dev_a} & {e.benchmark for e in dev_b}):
        rows_a = _rows([e for e in dev_a if e.benchmark == bench])
        rows_b = _rows([e for e in dev_b if e.benchmark == bench])
        shared = sorted(set.intersection(*(set(r) for r in rows_a + rows_b)))
        a = np.array([[r[i] for i in shared] for r in rows_a]) if shared else np.zeros((1, 0))
        b = np.array([[r[i] for i in shared] for r in rows_b]) if shared else np.zeros((1, 0))
        mean_a, mean_b = a.mean(axis=0), b.mean(axis=0)
        try:
            difference: Interval | str = paired_gain(a, b, 0.95)
        except ValueError as exc:
            difference = f"no interval: {exc}"
        out.append(
            SampleComparison(
                benchmark=bench,
                samples=[(s, float(mean_a[i]), float(mean_b[i])) for i, s in enumerate(shared)],
                a_higher=int((mean_a > mean_b).sum()),
                b_higher=int((mean_a < mean_b).sum()),
                difference=difference,
            )
        )
    return out


def _rows(evaluations: Sequence[Evaluation]) -> list[dict[str, float]]:
    """One row per (evaluation, epoch): sample id -> score."""
    rows: dict[tuple[str, int], dict[str, float]] = {}
    for ev in evaluations:
        for s in ev.samples:
            rows.setdefault((ev.id, s.epoch), {})[s.sample_id] = s.score
    return list(rows.values())


def compare_body(
    view: CampaignView, a: ExperimentRecords, b: ExperimentRecords, links: Links
) -> Html:
    """Two experiments side by side: config differences and dev scores sample by sample."""
    cid = view.campaign.id
    ea, eb = a.experiment, b.experiment
    keys = sorted(set(ea.config) | set(eb.config))
    config_rows = [
        [esc(k), esc(ea.config.get(k, DASH)), esc(eb.config.get(k, DASH))]
        for k in keys
        if ea.config.get(k) != eb.config.get(k)
    ]
    parts = [
        tag(
            "h1",
            esc("Compare ")
            + link(links.experiment(cid, ea.id), ea.id)
            + esc(" (a) with ")
            + link(links.experiment(cid, eb.id), eb.id)
            + esc(" (b)"),
        ),
        section(
            "Configuration differences",
            table(["key", "a", "b"], config_rows, empty="same configuration"),
        ),
    ]
    comparisons = compare_samples(a.evaluations, b.evaluations)
    if not comparisons:
        parts.append(
            section(
                "Scores",
                tag("p", esc("the two experiments share no dev-scored benchmark"), class_="empty"),
            )
        )
    for c in comparisons:
        higher = view.higher.get(c.benchmark, True)
        diff = (
            signed_interval(c.difference, higher=higher)
            if isinstance(c.difference, Interval)
            else esc(c.difference)
        )
        ordered = sorted(c.samples, key=lambda s: (-abs(s[1] - s[2]), s[0]))
        rows = [
            [
                esc(s),
                num(x),
                num(y),
                tag(
                    "span",
                    esc(f"{x - y:+.3f}"),
                    class_=better_class(x - y, x - y, higher),
                ),
            ]
            for s, x, y in ordered[:MAX_SAMPLE_ROWS]
        ]
        more = len(ordered) - MAX_SAMPLE_ROWS
        parts.append(
            section(
                f"{c.benchmark}: dev scores by sample",
                facts(
                    [
                        ("a - b (paired, 95%)", diff),
                        (
                            "samples",
                            esc(
                                f"{len(c.samples)}: a higher on {c.a_higher}, "
                                f"b higher on {c.b_higher}"
                            ),
                        ),
                    ]
                )
                + table(["sample", "a", "b", "a - b"], rows, numeric=(1, 2, 3), cls="samples")
                + (
                    tag("p", esc(f"{more} more samples with smaller differences"), class_="muted")
                    if more > 0
                    else Html("")
                ),
            )
        )
    return join(parts)


def compare_picker(view: CampaignView, links: Links, a: str = "", b: str = "") -> Html:
    """A form that chooses the two experiments to compare (live dashboard only)."""

    def options(chosen: str) -> str:
        return "".join(
            f'<option value="{esc(e.id)}"{" selected" if e.id == chosen else ""}>'
            f"{esc(e.id)} · {esc(e.description[:60])}</option>"
            for e in view.experiments
        )

    return join(
        [
            tag("h1", esc("Compare two experiments")),
            section(
                "Pick two",
                f'<form class="pick" method="get" action="{esc(links.compare(view.campaign.id))}">'
                f'<label>a <select name="a">{options(a)}</select></label> '
                f'<label>b <select name="b">{options(b)}</select></label> '
                '<button type="submit">compare</button></form>',
            ),
        ]
    )
