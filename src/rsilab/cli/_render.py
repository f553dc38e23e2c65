"""Rich renderings of ledger events and records, shared by ``log`` and ``show``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import JustifyMethod
from rich.json import JSON
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from rsilab.records import Event, Outcome, Record

_OUTCOME_STYLE = {Outcome.OK: "green", Outcome.ERROR: "red", Outcome.DENIED: "magenta"}

# (header, min width, justify); fixed minimums keep `log --follow` batches roughly aligned.
_EVENT_COLUMNS: tuple[tuple[str, int, JustifyMethod], ...] = (
    ("seq", 5, "right"),
    ("time (UTC)", 19, "left"),
    ("actor", 10, "left"),
    ("role", 10, "left"),
    ("action / tool", 22, "left"),
    ("outcome", 8, "left"),
    ("records written", 16, "left"),
)


def short_time(iso: str) -> str:
    """``2025-01-02T03:04:05.123456Z`` as ``2025-01-02 03:04:05``."""
    return iso[:19].replace("T", " ")


def event_table(events: Sequence[Event], *, header: bool = True) -> Table:
    """One row per event: seq, time, actor, role, action or tool, outcome, records written."""
    table = Table(box=box.SIMPLE_HEAD, show_header=header, pad_edge=False)
    for name, width, justify in _EVENT_COLUMNS:
        table.add_column(name, min_width=width, justify=justify)
    for event in events:
        table.add_row(*event_cells(event))
    return table


def event_cells(event: Event) -> list[Text]:
    """The cells of one event's row, as Text (never parsed as markup)."""
    if event.action == "tool_call" and event.tool:
        action = Text(event.tool, style="cyan")
    else:
        action = Text(event.action)
    outcome = Text(str(event.outcome), style=_OUTCOME_STYLE.get(event.outcome, ""))
    if event.error and "error" in event.error:
        outcome.append(f" {event.error['error']}")
    return [
        Text(str(event.seq)),
        Text(short_time(event.at)),
        Text(event.actor),
        Text(event.role),
        action,
        outcome,
        Text(", ".join(ref.id for ref in event.records)),
    ]


def json_panel(value: Any, title: str, subtitle: str = "") -> Panel:
    """A panel holding ``value`` as highlighted JSON."""
    return Panel(
        JSON(json.dumps(value, ensure_ascii=False), indent=2),
        title=Text(title, style="bold"),
        subtitle=Text(subtitle) if subtitle else None,
        title_align="left",
        expand=False,
    )


def record_panel(record: Record) -> Panel:
    """A record's fields as JSON, titled with its kind and summary."""
    return json_panel(
        record.model_dump(mode="json"), f"{record.KIND}: {record.summary()}", f"rev {record.rev}"
    )


def event_panel(event: Event) -> Panel:
    """An event in full."""
    return json_panel(event.model_dump(mode="json"), f"event {event.seq}", short_time(event.at))
