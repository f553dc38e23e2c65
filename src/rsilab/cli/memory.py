"""``rsilab memory``: the lab's shared memory (findings, skills, orientations); it only reads."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from rsilab.cli._common import LabOption, print_json, reading_stored_data, stdout_console
from rsilab.errors import UserError
from rsilab.memory import (
    adoption_counts,
    lab_findings,
    latest_orientations,
    latest_skills,
    orientation_history,
    skill_history,
    superseded_by,
)
from rsilab.records import Interval, Orientation, Skill
from rsilab.store import Lab, Store

CLAIM_CHARS = 120


class Section(StrEnum):
    """What ``rsilab memory`` lists."""

    ALL = "all"
    FINDINGS = "findings"
    SKILLS = "skills"
    ORIENTATIONS = "orientations"


_STATUS_STYLE = {"supported": "green", "refuted": "red", "unresolved": "yellow"}


def memory(
    section: Annotated[
        Section,
        typer.Argument(help="findings, skills, orientations, or all.", show_default=True),
    ] = Section.ALL,
    task: Annotated[
        str | None,
        typer.Option("--task", metavar="TASK", help="Only findings of this task."),
    ] = None,
    history: Annotated[
        str | None,
        typer.Option(
            "--history",
            metavar="NAME",
            help="Every version of the skill or orientation NAME (with skills or orientations).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON, with full texts.")] = False,
    lab: LabOption = None,
) -> None:
    """The lab's shared memory: findings (status, claim, recomputed effect, adoptions,
    supersession), and skills and orientations with their versions.

    An unresolved finding is an open problem, not a result. It only reads the lab.
    """
    if history is not None and section not in (Section.SKILLS, Section.ORIENTATIONS):
        raise UserError(
            "--history names a skill or an orientation",
            "run `rsilab memory skills --history NAME` or `rsilab memory orientations --history "
            "NAME`",
        )
    with Lab.open(lab) as opened, reading_stored_data():
        data = _collect(opened.store, section, task, history)
    if history is not None and not data["history"]:
        raise UserError(
            f"no {section.value[:-1]} named {history!r} in this lab",
            f"list them with `rsilab memory {section.value}`",
        )
    if as_json:
        print_json(data)
        return
    _print(stdout_console(), data, history)


def _collect(
    store: Store, section: Section, task: str | None, history: str | None
) -> dict[str, Any]:
    if history is not None:
        records: list[Skill] | list[Orientation] = (
            skill_history(store, history)
            if section is Section.SKILLS
            else orientation_history(store, history)
        )
        return {"history": [_revision_json(r) for r in records]}
    out: dict[str, Any] = {}
    if section in (Section.ALL, Section.FINDINGS):
        out["findings"] = _findings_json(store, task)
    if section in (Section.ALL, Section.SKILLS):
        out["skills"] = [_latest_json(store, s) for s in latest_skills(store)]
    if section in (Section.ALL, Section.ORIENTATIONS):
        out["orientations"] = [_latest_json(store, o) for o in latest_orientations(store)]
    return out


def _findings_json(store: Store, task: str | None) -> list[dict[str, Any]]:
    every = lab_findings(store)
    later, counts = superseded_by(every), adoption_counts(store)
    return [
        {
            "id": f.id,
            "task": f.task,
            "status": str(f.status),
            "claimed_status": str(f.claimed_status) if f.claimed_status else None,
            "claim": f.claim,
            "conditions": f.conditions,
            "uncertainty": f.uncertainty,
            "effect": f.effect.model_dump(mode="json") if f.effect else None,
            "structured": f.structured.model_dump(mode="json") if f.structured else None,
            "check": f.check,
            "tags": f.tags,
            "sources": f.sources,
            "author": f.author,
            "origin_campaign_id": f.origin_campaign_id,
            "supersedes": f.supersedes,
            "superseded_by": list(later.get(f.id, ())),
            "adoptions": counts[f.id],
            "created_at": f.created_at,
        }
        for f in every
        if task is None or f.task == task
    ]


def _latest_json(store: Store, record: Skill | Orientation) -> dict[str, Any]:
    history = (
        skill_history(store, record.name)
        if isinstance(record, Skill)
        else orientation_history(store, record.name)
    )
    return {**_revision_json(record), "versions": [r.version for r in history]}


def _revision_json(record: Skill | Orientation) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": record.name,
        "version": record.version,
        "id": record.id,
        "parent_id": record.parent_id,
        "text": record.text,
        "created_at": record.created_at,
    }
    if isinstance(record, Skill):
        out["code"] = record.code
    else:
        out["weight"] = record.weight
    return out


def _print(console: Console, data: dict[str, Any], history: str | None) -> None:
    if history is not None:
        n = len(data["history"])
        console.print(Text(f"{history}: {n} version{'s' if n != 1 else ''}", style="bold"))
        console.print(_history_table(data["history"]))
        return
    if "findings" in data:
        console.print(_findings_table(data["findings"]))
    for key in ("skills", "orientations"):
        if key in data:
            console.print(_latest_table(key, data[key]))


def _findings_table(findings: list[dict[str, Any]]) -> Table | Text:
    if not findings:
        return Text("no findings yet", style="dim")
    table = Table(
        "finding", "task", "status", "claim", "effect (a - b)", "adoptions", "superseded by"
    )
    table.title = "findings (an unresolved one is an open problem, not a result)"
    for f in findings:
        status = Text(f["status"], style=_STATUS_STYLE.get(f["status"], ""))
        if f["claimed_status"]:
            status.append(f" (claimed {f['claimed_status']})", style="dim")
        table.add_row(
            f["id"],
            f["task"] or "-",
            status,
            _brief(f["claim"]),
            _effect(f),
            str(f["adoptions"]),
            ", ".join(f["superseded_by"]) or "-",
        )
    return table


def _effect(f: dict[str, Any]) -> str:
    if f["effect"] is None:
        return "-"
    e = Interval.model_validate(f["effect"])
    return f"{f['structured']['metric']} {e.value:+.4f} [{e.low:+.4f}, {e.high:+.4f}]"


def _latest_table(key: str, rows: list[dict[str, Any]]) -> Table | Text:
    if not rows:
        return Text(f"no {key} yet", style="dim")
    table = Table(key[:-1], "version", "id", "history", *_weight_column(rows), "text")
    table.title = f"{key} (latest versions)"
    for r in rows:
        history = " <- ".join(f"v{v}" for v in reversed(r["versions"]))
        table.add_row(
            r["name"], f"v{r['version']}", r["id"], history, *_weight(r), _brief(r["text"])
        )
    return table


def _history_table(rows: list[dict[str, Any]]) -> Table:
    table = Table("version", "id", "parent", "created", *_weight_column(rows), "text")
    for r in rows:
        table.add_row(
            f"v{r['version']}",
            r["id"],
            r["parent_id"] or "-",
            r["created_at"],
            *_weight(r),
            _brief(r["text"]),
        )
    return table


def _weight_column(rows: list[dict[str, Any]]) -> list[str]:
    """An orientation's weight (its share of a team at the start), or a skill's code, gets
    a column: it is what a campaign review revises."""
    if rows and "weight" in rows[0]:
        return ["weight"]
    return ["code"] if rows and "code" in rows[0] else []


def _weight(row: dict[str, Any]) -> list[str]:
    if "weight" in row:
        return [f"{row['weight']:g}"]
    return [_brief(row["code"] or "-").plain] if "code" in row else []


def _brief(text: str) -> Text:
    flat = " ".join(text.split())
    return Text(flat if len(flat) <= CLAIM_CHARS else flat[: CLAIM_CHARS - 1] + "…")


def register(app: typer.Typer) -> None:
    """Add ``memory`` to ``app``."""
    app.command("memory")(memory)
