"""Page bodies about experiments: one experiment in full, and two compared sample by sample."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from markupsafe import Markup

from rsilab.errors import NotFoundError
from rsilab.records import DataTier, Evaluation, Event, Experiment, Interval, Job
from rsilab.stats import paired_gain
from rsilab.store import StoreReader
from rsilab.store.artifacts import ArtifactStore
from rsilab.web._diff import FileChange, tree_changes
from rsilab.web._format import DASH
from rsilab.web._links import Links
from rsilab.web._read import CampaignView
from rsilab.web._templates import render

LOG_TAIL_LINES = 200
"""Lines of a job's output shown (the last ones)."""

SAMPLES_PER_PAGE = 25
"""Samples listed per page of a comparison, most different first."""


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
) -> Markup:
    """One experiment: what it is, its config, scores, jobs with logs, resources, the diff of
    its workspace against its parent's, and its ledger events."""
    e = found.experiment
    others = [x.id for x in view.experiments if x.id != e.id]
    return render(
        "experiment.html",
        view=view,
        found=found,
        links=links,
        titles={d.id: d.title for d in view.directions},
        candidates=[c for c in view.candidates if c.experiment_id == e.id],
        compare_with=e.parent_experiment_id or (others[-1] if others else ""),
        config_json=json.dumps(e.config, indent=2, sort_keys=True, default=str),
        scores=_scores(view, found.evaluations),
        logs=_logs(found.jobs, artifacts),
        diff=_diff(view, e, artifacts),
    )


@dataclass(frozen=True)
class _Score:
    benchmark: str
    tier: str
    metric: str
    mean: float | None
    samples: int
    epochs: int
    id: str


def _scores(view: CampaignView, evaluations: Sequence[Evaluation]) -> list[_Score]:
    place = {name: i for i, name in enumerate(view.order({ev.benchmark for ev in evaluations}))}
    return [
        _Score(
            ev.benchmark,
            "dev" if ev.tier == DataTier.DEV else f"{ev.tier} (out of fold)",
            ev.metric,
            float(np.mean([s.score for s in ev.samples])) if ev.samples else None,
            len({s.sample_id for s in ev.samples}),
            len({s.epoch for s in ev.samples}),
            ev.id,
        )
        for ev in sorted(evaluations, key=lambda ev: place[ev.benchmark])
        if ev.tier in (DataTier.DEV, DataTier.TRAIN)
    ]


@dataclass(frozen=True)
class _Log:
    title: str
    text: str = ""
    missing: str = ""
    """Why the log cannot be shown ('' when it can)."""


def _logs(jobs: Sequence[Job], artifacts: ArtifactStore) -> list[_Log]:
    return [
        _log_tail(artifacts, f"{j.id} ({j.kind}) {name}", sha)
        for j in jobs
        for name, sha in (("stdout", j.stdout_sha256), ("stderr", j.stderr_sha256))
        if sha
    ]


def _log_tail(artifacts: ArtifactStore, title: str, sha: str) -> _Log:
    try:
        text = artifacts.read_bytes(sha).decode("utf-8", errors="replace")
    except NotFoundError:
        return _Log(title, missing=f"log {sha[:12]} is no longer in the lab (collected)")
    lines = text.splitlines()
    cut = len(lines) - LOG_TAIL_LINES
    head = f"… {cut} earlier lines not shown\n" if cut > 0 else ""
    return _Log(title, head + "\n".join(lines[-LOG_TAIL_LINES:]) if lines else "(empty)")


@dataclass(frozen=True)
class _ShownChange:
    path: str
    status: str
    diff: str
    note: str
    lines: list[tuple[str, str]]
    """(class, text) per line of the diff: hunk, add, del or ''."""


@dataclass(frozen=True)
class _Diff:
    message: str = ""
    """Why there is no diff ('' when there is one)."""
    against: str = ""
    changes: list[_ShownChange] = field(default_factory=list)
    ignored: int = 0
    reformatted: tuple[str, ...] = ()


def _diff(view: CampaignView, e: Experiment, artifacts: ArtifactStore) -> _Diff:
    if e.workspace_hash is None:
        return _Diff("no workspace snapshot yet (taken when the experiment finishes)")
    base, what = _parent_tree(view, e)
    try:
        found = tree_changes(artifacts, base, e.workspace_hash)
    except NotFoundError as exc:
        return _Diff(f"a workspace snapshot is no longer in the lab: {exc}")
    return _Diff(
        against=what,
        changes=[_shown(c) for c in found.changes],
        ignored=found.ignored,
        reformatted=found.reformatted,
    )


def _shown(change: FileChange) -> _ShownChange:
    lines = [(_line_class(line), line) for line in change.diff.splitlines()]
    return _ShownChange(change.path, change.status, change.diff, change.note, lines)


def _line_class(line: str) -> str:
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("+") and not line.startswith("+++"):
        return "add"
    if line.startswith("-") and not line.startswith("---"):
        return "del"
    return ""


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


@dataclass(frozen=True)
class _SampleTable:
    benchmark: str
    higher: bool
    interval: Interval | None
    reason: str
    count: int
    a_higher: int
    b_higher: int
    first: int
    last: int
    rows: list[tuple[int, str, float, float]]
    """(rank from 1, sample id, a's mean, b's mean), most different first."""
    steps: list[tuple[str, str]]


@dataclass(frozen=True)
class _Compared:
    a: Experiment
    b: Experiment
    config_rows: list[tuple[str, Any, Any]]
    comparisons: list[_SampleTable]


def compare_body(
    view: CampaignView,
    a: ExperimentRecords,
    b: ExperimentRecords,
    links: Links,
    *,
    page: int = 1,
    defaulted: str = "",
) -> Markup:
    """The picker, then two experiments side by side: config differences and, per benchmark,
    dev scores sample by sample, :data:`SAMPLES_PER_PAGE` of the most different at a time
    (page ``page``, from 1, with links to the pages around it). ``defaulted`` says why this
    pair is shown when the reader chose none."""
    cid = view.campaign.id
    ea, eb = a.experiment, b.experiment
    config_rows = [
        (k, ea.config.get(k, DASH), eb.config.get(k, DASH))
        for k in sorted(set(ea.config) | set(eb.config))
        if ea.config.get(k) != eb.config.get(k)
    ]
    tables = []
    compared = {c.benchmark: c for c in compare_samples(a.evaluations, b.evaluations)}
    for c in (compared[name] for name in view.order(compared)):
        ordered = sorted(c.samples, key=lambda s: (-abs(s[1] - s[2]), s[0]))
        pages = max(1, -(-len(ordered) // SAMPLES_PER_PAGE))
        at = min(max(page, 1), pages)
        start = (at - 1) * SAMPLES_PER_PAGE
        rows = [
            (start + i + 1, *s) for i, s in enumerate(ordered[start : start + SAMPLES_PER_PAGE])
        ]
        steps = [
            (f"{links.compare(cid, ea.id, eb.id)}&page={n}#samples-{c.benchmark}", label)
            for n, label in ((at - 1, "previous samples"), (at + 1, "next samples"))
            if 1 <= n <= pages and not links.static
        ]
        tables.append(
            _SampleTable(
                benchmark=c.benchmark,
                higher=view.higher.get(c.benchmark, True),
                interval=c.difference if isinstance(c.difference, Interval) else None,
                reason=c.difference if isinstance(c.difference, str) else "",
                count=len(c.samples),
                a_higher=c.a_higher,
                b_higher=c.b_higher,
                first=start + 1,
                last=start + len(rows),
                rows=rows,
                steps=steps,
            )
        )
    return render(
        "compare.html",
        view=view,
        links=links,
        a=ea.id,
        b=eb.id,
        defaulted=defaulted,
        result=_Compared(ea, eb, config_rows, tables),
    )


def compare_picker(view: CampaignView, links: Links) -> Markup:
    """The form that chooses two experiments to compare, with nothing compared yet."""
    return render("compare.html", view=view, links=links, a="", b="", defaulted="", result=None)


def default_pair(view: CampaignView) -> tuple[str, str, str] | None:
    """The pair the compare page shows when none was chosen: the campaign's first experiment
    (its reference: the start version as it is) against the best other one on the first
    target benchmark, with a sentence saying so; None with fewer than two experiments."""
    if len(view.experiments) < 2:
        return None
    reference = view.experiments[0].id
    targets = [b.name for b in view.benchmarks if b.target] or view.order(
        {b for scores in view.dev.values() for b in scores}
    )
    higher = view.higher
    scored = [
        (view.dev[e.id][targets[0]].mean, e.id)
        for e in view.experiments[1:]
        if targets and targets[0] in view.dev.get(e.id, {})
    ]
    if scored:
        up = higher.get(targets[0], True)
        score, best = (max if up else min)(scored, key=lambda s: s[0])
        why = f"the reference {reference} against the best on {targets[0]} ({score:.3f})"
        return reference, best, why
    last = view.experiments[-1].id
    return reference, last, f"the reference {reference} against the latest, {last}"
