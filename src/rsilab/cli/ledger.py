"""``rsilab log``, ``show`` and ``verify``: read the ledger, look up records, check the chain."""

from __future__ import annotations

import dataclasses
import functools
import re
import sys
import time
from collections.abc import Callable
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from rsilab.cli._common import (
    EXIT_RUNTIME_FAILURE,
    EXIT_VERIFY_FAILED,
    CampaignOption,
    JsonOption,
    LabOption,
    ctrl_c_requests,
    print_json,
    reading_stored_data,
    stdout_console,
)
from rsilab.cli._render import event_panel, event_table, record_panel
from rsilab.errors import LabDamaged, NotFoundError, UserError
from rsilab.expos import find_campaign
from rsilab.records import Event, kind_of_id
from rsilab.store import Lab, Store, VerifyReport, verify_store

FOLLOW_INTERVAL_S = 0.5
_EVENT_REF = re.compile(r"^(?:event:)?(\d+)$")


def log(
    campaign: CampaignOption = None,
    limit: Annotated[
        int, typer.Option("--limit", min=0, help="Show the last N events; 0 for all.")
    ] = 50,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new events until Ctrl-C.")
    ] = False,
    as_json: JsonOption = False,
    lab: LabOption = None,
) -> None:
    """Show ledger events, newest last.

    With --json: a JSON array of the events (each as `rsilab schema` describes an Event);
    with --json --follow: JSON Lines instead, one event object a line, as they come.
    """
    console = stdout_console()
    # a lab read without writing may be a frozen snapshot of it: --follow waits on writers
    with Lab.open(lab, read_only=not follow) as opened, reading_stored_data():
        campaign_id = find_campaign(opened.store, campaign).id if campaign else None
        events = last_events(opened.store, campaign_id, limit)
        if as_json:
            _print_events_json(events, lines=follow)
        elif events:
            console.print(event_table(events))
        elif not follow:
            console.print("no events" + (f" in campaign {campaign_id}" if campaign_id else ""))
        if follow:
            last_seq = events[-1].seq if events else opened.store.head()[0]
            show = functools.partial(_print_events_json, lines=True) if as_json else None
            _follow(opened.store, console, campaign_id, last_seq, header=not events, show=show)


def _print_events_json(events: list[Event], *, lines: bool) -> None:
    """``events`` as one JSON array, or with ``lines`` as JSON Lines (one event a line)."""
    dumped = [e.model_dump(mode="json") for e in events]
    if not lines:
        print_json(dumped)
        return
    for event in dumped:
        print_json(event, line=True)


def last_events(store: Store, campaign_id: str | None, limit: int) -> list[Event]:
    """The last ``limit`` events (all for 0), optionally of one campaign, oldest first."""
    if campaign_id is not None:
        events = store.events(campaign_id=campaign_id)
        return events[-limit:] if limit else events
    if not limit:
        return store.events()
    head, _ = store.head()  # sequence numbers have no gaps, so the tail starts here
    return store.events(after=max(0, head - limit))


def _follow(
    store: Store,
    console: Console,
    campaign_id: str | None,
    last_seq: int,
    *,
    header: bool,
    show: Callable[[list[Event]], None] | None = None,
) -> None:
    """Poll for events after ``last_seq`` until interrupted, printing each batch with ``show``
    (default: table rows on ``console``); Ctrl-C ends it cleanly (exit 0).

    Ctrl-C only sets a flag the loop reads between polls (a second one interrupts at once):
    an interrupt raised inside a store read could leave the store's lock held, and closing the
    lab would then wait forever.
    """
    requests = [0]  # set by the signal handler: no lock, so it can never wait on one

    def request() -> int:
        requests[0] += 1
        return requests[0]

    try:
        with ctrl_c_requests(request, 2):
            while not requests[0]:
                new = store.events(after=last_seq, campaign_id=campaign_id)
                if new and show is not None:
                    show(new)
                elif new:
                    console.print(event_table(new, header=header))
                    sys.stdout.flush()
                    header, last_seq = False, new[-1].seq
                time.sleep(FOLLOW_INTERVAL_S)
    except KeyboardInterrupt:
        return


def show(
    ident: Annotated[
        str,
        typer.Argument(metavar="ID", help="A record id, or an event number (42 or event:42)."),
    ],
    as_json: JsonOption = False,
    lab: LabOption = None,
) -> None:
    """Show a record and the events that wrote it, or one ledger event in full.

    With --json: `{"record": ..., "events": [...]}` for a record, `{"event": ...}` for an
    event.
    """
    console = stdout_console()
    with Lab.open(lab, read_only=True) as opened, reading_stored_data():
        match = _EVENT_REF.match(ident)
        if match:
            event = _event(opened.store, int(match.group(1)))
            if as_json:
                print_json({"event": event.model_dump(mode="json")})
            else:
                console.print(event_panel(event))
            return
        try:
            record = opened.store.get(ident)
        except NotFoundError:
            raise _unknown_id(ident) from None
        history = opened.store.events(record_id=record.id)
    if as_json:
        dumped = [e.model_dump(mode="json") for e in history]
        print_json({"record": record.model_dump(mode="json"), "events": dumped})
        return
    console.print(record_panel(record))
    count = f"{len(history)} event" + ("" if len(history) == 1 else "s")
    console.print(Text(f"history ({count})", style="bold"))
    console.print(event_table(history))


def _event(store: Store, seq: int) -> Event:
    found = store.events(after=seq - 1, limit=1) if seq > 0 else []
    if not found or found[0].seq != seq:
        head, _ = store.head()
        raise UserError(
            f"no event {seq} in this lab (the ledger has events 1 to {head})",
            "list events with `rsilab log`",
        )
    return found[0]


def _unknown_id(ident: str) -> UserError:
    if kind_of_id(ident) is None:
        return UserError(
            f"{ident!r} is neither a record id nor an event number",
            "record ids look like exp-3fa9c2d1b07e; find them with `rsilab log`",
        )
    return UserError(f"no record {ident!r} in this lab", "find ids with `rsilab log`")


def verify(
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    deep: Annotated[
        bool, typer.Option("--deep", help="Also re-hash every stored artifact (slower).")
    ] = False,
    lab: LabOption = None,
) -> None:
    """Check the database file, the ledger's hash chain, records, signed checkpoints and
    artifacts. Exit 3 if anything is damaged or altered."""
    try:
        with Lab.open(lab, read_only=True) as opened:
            report = verify_store(opened.store, artifacts=opened.artifacts, deep=deep)
    except LabDamaged as exc:  # so damaged that it does not open: a failed verification
        report = VerifyReport()
        report.fail(None, exc.message)
    if as_json:
        print_json({"ok": report.ok, "complete": report.complete, **dataclasses.asdict(report)})
    else:
        _print_report(stdout_console(), report)
    if not report.ok:
        raise typer.Exit(EXIT_VERIFY_FAILED)
    if not report.complete:  # a skipped check is not a pass
        raise typer.Exit(EXIT_RUNTIME_FAILURE)


def _print_report(console: Console, report: VerifyReport) -> None:
    for warning in report.warnings:
        console.print(Text(f"warning: {warning}", style="yellow"), soft_wrap=True)
    if report.ok and not report.complete:
        console.print(
            Text(
                f"ledger NOT fully verified: the hash chain of {report.events} events and "
                f"{report.records_checked} records holds, but {report.checkpoints_unchecked} "
                "signed checkpoint(s) went unchecked because the ledger key was not found, so "
                "a ledger rebuilt or cut short would pass too",
                style="bold yellow",
            ),
            soft_wrap=True,
        )
        console.print(Text(f"head hash: {report.head_hash}"), soft_wrap=True)
        return
    if report.ok:
        console.print(
            Text(
                f"ledger ok: {report.events} events, {report.records_checked} records, "
                f"{report.checkpoints_checked} checkpoints, {report.artifacts_checked} "
                "artifacts checked",
                style="green",
            )
        )
        console.print(Text(f"head hash: {report.head_hash}"), soft_wrap=True)
        return
    console.print(Text("ledger verification FAILED", style="bold red"))
    if report.first_bad_seq is not None:
        console.print(Text(f"first bad event: {report.first_bad_seq}", style="red"))
    for problem in report.problems:
        console.print(Text(f"- {problem}", style="red"), soft_wrap=True)
    console.print(
        Text(
            "hint: restore the lab from a backup made before the damage (`rsilab backup DEST` "
            "makes one; see docs/concepts.md, Backups and a damaged lab)",
            style="yellow",
        ),
        soft_wrap=True,
    )


def register(app: typer.Typer) -> None:
    """Add ``log``, ``show`` and ``verify`` to ``app``."""
    app.command("log")(log)
    app.command("show")(show)
    app.command("verify")(verify)
