"""``rsilab baseline``, ``versions``, ``rollback`` and ``gc``: lineages and the lab's disk."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from rsilab.cli._common import LabOption, print_json, reading_stored_data, stdout_console
from rsilab.controller.gc import GcReport, blob_bytes, collect_garbage
from rsilab.controller.lab_settings import DEFAULT_KEEP_TOP, lab_settings
from rsilab.controller.lineage import (
    find_lineage,
    lineage_candidates,
    lineage_versions,
    require_lineage,
    rollback,
)
from rsilab.errors import UserError
from rsilab.records import Campaign, Candidate, Interval, Lineage, SystemVersion
from rsilab.store import Lab, StoreReader
from rsilab.tasks import Declared, load_task, metric_order

CLI_ACTOR = "cli"
SHORT = 12
REASON_CHARS = 240

TaskArgument = Annotated[
    str, typer.Argument(metavar="TASK", help="Task name, task.toml, or file.py[:NAME].")
]
LineageOption = Annotated[
    str, typer.Option("--lineage", metavar="NAME", help="Lineage of the task.")
]


def _task_name(ref: str) -> str:
    """The task's name: ``ref`` itself unless it names a task file or folder."""
    return load_task(ref).name if Path(ref.rpartition(":")[0] or ref).exists() else ref


def _declared(store: StoreReader, ref: str, name: str) -> Sequence[Declared]:
    """The benchmarks of the task ``ref`` names, for the order of score columns: loaded from
    ``ref``, else from the newest campaign of task ``name`` (a task.toml named by its name);
    none (names sorted) when neither loads here: the records alone still list every score."""
    from rsilab.orchestrator.report import task_benchmarks

    try:
        return load_task(ref).benchmarks
    except UserError:
        pass
    runs = [c for c in store.query_as(Campaign) if c.task.name == name]
    newest = max(runs, key=lambda c: c.created_at, default=None)
    return task_benchmarks(newest.task) if newest is not None else []


def baseline(
    task_ref: TaskArgument,
    lineage: LineageOption = "main",
    seeds: Annotated[
        int | None,
        typer.Option(
            "--seeds",
            min=1,
            metavar="N",
            help="Seeds the baseline is trained with. Default: twice a candidate's (6).",
            show_default=False,
        ),
    ] = None,
    slots: Annotated[
        int | None,
        typer.Option(
            "--slots",
            min=1,
            metavar="N",
            help="Parallel jobs. Default: min(seeds, cores).",
            show_default=False,
        ),
    ] = None,
    lab: LabOption = None,
) -> None:
    """Evaluate the task's initial system on every benchmark as the lineage's first version."""
    # Imported here: the controller pulls in numpy and the task machinery, which every other
    # command (and `rsilab --help`) can do without.
    from rsilab.controller.host import DEFAULT_SEEDS, HostController
    from rsilab.executors.local import LocalExecutor, available_cores
    from rsilab.sandbox.select import default_sandbox

    seeds = seeds or 2 * DEFAULT_SEEDS
    task = load_task(task_ref)
    with Lab.open(lab) as opened:
        if find_lineage(opened.store, task.name, lineage) is not None:
            raise UserError(
                f"{task.name}/{lineage} already has a baseline",
                f"see it with: rsilab versions {task.name} --lineage {lineage}",
            )
        sandbox = default_sandbox(runtime=task.own_runtime(), shown=task.shown())
        try:
            executor = LocalExecutor(
                sandbox, opened.artifacts, slots or min(seeds, available_cores())
            )
            try:
                controller = HostController(
                    opened, task, executor, lineage=lineage, baseline_seeds=seeds
                )
                version = controller.baseline(actor=CLI_ACTOR)
            finally:
                executor.shutdown()
        finally:
            sandbox.close()
    console = stdout_console()
    console.print(
        Text(f"baseline {task.name}/{lineage} {version.label} {version.id}", style="green"),
        soft_wrap=True,
    )
    table = Table("benchmark", "final-tier score (95% interval)")
    for name in metric_order(version.scores, task.benchmarks):
        table.add_row(name, _interval(version.scores[name]))
    console.print(table)


def versions(
    task_ref: TaskArgument,
    lineage: LineageOption = "main",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    lab: LabOption = None,
) -> None:
    """The lineage's versions (scores, decisions, head) and every candidate proposed to it."""
    task = _task_name(task_ref)
    with Lab.open(lab) as opened, reading_stored_data():
        found = require_lineage(opened.store, task, lineage)
        members = lineage_versions(opened.store, found)
        candidates = lineage_candidates(opened.store, task, lineage)
        declared = _declared(opened.store, task_ref, task)
    if as_json:
        print_json(lineage_json(found, members, candidates))
        return
    console = stdout_console()
    console.print(Text(f"{task}/{lineage}: head {found.head_id}", style="bold"), soft_wrap=True)
    console.print(_versions_table(found, members, declared))
    if not candidates:
        console.print(Text("no candidates yet", style="dim"))
        return
    console.print(_candidates_table(candidates))
    console.print(
        Text(
            f"full decisions and reasons: rsilab show ID, or rsilab versions {task} --json", "dim"
        ),
        soft_wrap=True,
    )


def lineage_json(
    lineage: Lineage, members: list[SystemVersion], candidates: list[Candidate]
) -> dict[str, Any]:
    """What ``versions --json`` prints: the lineage, its versions and its candidates."""
    return {
        "task": lineage.task,
        "lineage": lineage.name,
        "head_id": lineage.head_id,
        "versions": [
            {
                "id": v.id,
                "label": v.label,
                "head": v.id == lineage.head_id,
                "parent_id": v.parent_id,
                "candidate_id": v.candidate_id,
                "rollback_of": v.rollback_of,
                "harness_sha256": v.harness_sha256,
                "model_sha256": v.model_sha256,
                "scores": {k: s.model_dump(mode="json") for k, s in sorted(v.scores.items())},
                "decision": v.decision,
                "created_at": v.created_at,
            }
            for v in members
        ],
        "candidates": [
            {
                "id": c.id,
                "state": str(c.state),
                "parent_version_id": c.parent_version_id,
                "compared_to": c.compared_to,
                "version_id": c.version_id,
                "harness_sha256": c.harness_sha256,
                "proposer": c.proposer,
                "campaign_id": c.campaign_id,
                "reason": c.reason,
                "created_at": c.created_at,
            }
            for c in candidates
        ],
    }


def _brief(text: str) -> Text:
    """``text`` on one line, cut at :data:`REASON_CHARS` (``--json`` and ``show`` have it all)."""
    flat = " ".join(text.split())
    return Text(flat if len(flat) <= REASON_CHARS else flat[: REASON_CHARS - 1] + "…")


def _interval(score: Interval) -> str:
    return f"{score.value:.4f} [{score.low:.4f}, {score.high:.4f}]"


def _versions_table(
    lineage: Lineage, members: list[SystemVersion], declared: Sequence[Declared]
) -> Table:
    """The versions, their scores in :func:`~rsilab.tasks.metric_order` of ``declared``."""
    benches = metric_order({name for v in members for name in v.scores}, declared)
    table = Table("", "label", "id", "parent", "harness", "model", *benches, "decision")
    for v in members:
        note = f"rollback of {v.rollback_of}" if v.rollback_of else v.decision
        table.add_row(
            Text("*", style="bold green") if v.id == lineage.head_id else "",
            v.label,
            v.id,
            v.parent_id or "-",
            v.harness_sha256[:SHORT],
            (v.model_sha256 or "-")[:SHORT],
            *[_interval(v.scores[b]) if b in v.scores else "-" for b in benches],
            _brief(note),
        )
    return table


_STATE_STYLE = {"accepted": "green", "rejected": "yellow", "invalid": "red", "stale": "magenta"}


def _candidates_table(candidates: list[Candidate]) -> Table:
    table = Table("candidate", "state", "parent", "compared to", "reason")
    for c in candidates:
        table.add_row(
            c.id,
            Text(str(c.state), style=_STATE_STYLE.get(str(c.state), "")),
            c.parent_version_id,
            c.compared_to or "-",
            _brief(c.reason),
        )
    return table


def rollback_command(
    task_ref: TaskArgument,
    version: Annotated[
        str, typer.Argument(metavar="VERSION", help="A version id, or a label like H0/M0.")
    ],
    lineage: LineageOption = "main",
    lab: LabOption = None,
) -> None:
    """Make an earlier version the head again, by appending a copy of it (history stays)."""
    task = _task_name(task_ref)
    with Lab.open(lab) as opened, reading_stored_data():
        found = require_lineage(opened.store, task, lineage)
        target = _resolve_version(lineage_versions(opened.store, found), version, found)
        restored = rollback(opened.store, task, lineage, target.id, actor=CLI_ACTOR)
    stdout_console().print(
        Text(
            f"rolled back {task}/{lineage}: new head {restored.label} {restored.id} "
            f"(a copy of {target.id})",
            style="green",
        ),
        soft_wrap=True,
    )


def _resolve_version(members: list[SystemVersion], ref: str, lineage: Lineage) -> SystemVersion:
    """The member with id ``ref``, else the first with label ``ref`` (later ones are copies)."""
    match = next((v for v in members if v.id == ref), None) or next(
        (v for v in members if v.label == ref), None
    )
    hint = f"pick one listed by: rsilab versions {lineage.task} --lineage {lineage.name}"
    if match is None:
        raise UserError(f"{ref} is not a version of {lineage.task}/{lineage.name}", hint)
    if match.id == lineage.head_id:
        raise UserError(f"{match.id} ({match.label}) is already the head", hint)
    return match


def gc(
    keep_top: Annotated[
        int,
        typer.Option(
            "--keep-top",
            min=0,
            metavar="K",
            help="Keep the models and logs of the K best-scoring candidates outside each lineage.",
        ),
    ] = DEFAULT_KEEP_TOP,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be removed; remove nothing.")
    ] = False,
    lab: LabOption = None,
) -> None:
    """Remove blobs no version, candidate worth keeping, dataset or open work needs.

    Each removed blob leaves a tombstone record; hashes and records stay, and `rsilab verify`
    still passes. See docs/controller.md ("Versions, baselines and disk") for the exact rule.
    """
    with Lab.open(lab) as opened, reading_stored_data():
        report = collect_garbage(opened, keep_top=keep_top, dry_run=dry_run, actor=CLI_ACTOR)
        settings = lab_settings(opened.path)
        used = blob_bytes(opened.artifacts)
    _print_gc(report)
    if settings.size_limit is not None:
        stdout_console().print(
            Text(f"size limit: {_size(used)} of {_size(settings.size_limit)} used"),
            soft_wrap=True,
        )


def _print_gc(report: GcReport) -> None:
    console = stdout_console()
    if report.dry_run and report.removed:
        table = Table("blob", "reason")
        for sha in report.removed:
            table.add_row(sha[:SHORT], Text(report.reasons.get(sha, "")))
        console.print(table)
    verb = "would free" if report.dry_run else "freed"
    console.print(
        Text(
            f"{verb} {_size(report.freed_bytes)} ({report.freed_bytes} bytes) in "
            f"{len(report.removed)} blobs; kept {report.kept} blobs ({_size(report.kept_bytes)})"
            + (" (dry run: nothing removed)" if report.dry_run else ""),
            style="green",
        ),
        soft_wrap=True,
    )


def _size(n: int) -> str:
    """``n`` bytes for people: ``512 B``, ``3.4 MiB``."""
    if n < 1024:
        return f"{n} B"
    value, units = n / 1024, ["KiB", "MiB", "GiB", "TiB"]
    while value >= 1024 and len(units) > 1:
        value, units = value / 1024, units[1:]
    return f"{value:.1f} {units[0]}"


def register(app: typer.Typer) -> None:
    """Add ``baseline``, ``versions``, ``rollback`` and ``gc`` to ``app``."""
    app.command("baseline")(baseline)
    app.command("versions")(versions)
    app.command("rollback")(rollback_command)
    app.command("gc")(gc)
