"""``rsilab backup DEST``: a verified copy of the lab, taken while it may be in use."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from rsilab.cli._common import (
    EXIT_RUNTIME_FAILURE,
    EXIT_VERIFY_FAILED,
    LabOption,
    print_json,
    report_user_error,
    stdout_console,
)
from rsilab.errors import LabDamaged, UserError
from rsilab.store import Lab
from rsilab.store.backup import BackupFailed, BackupReport, backup_lab


def backup(
    dest: Annotated[
        Path,
        typer.Argument(metavar="DEST", help="A new (or empty) folder to copy the lab into."),
    ],
    workspaces: Annotated[
        bool,
        typer.Option("--workspaces", help="Also copy the agents' workspaces (scratch folders)."),
    ] = False,
    no_key: Annotated[
        bool,
        typer.Option("--no-key", help="Leave the ledger key out of DEST/keys."),
    ] = False,
    quick: Annotated[
        bool,
        typer.Option("--quick", help="Verify the copy without re-hashing every blob."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the outcome as JSON.")] = False,
    lab: LabOption = None,
) -> None:
    """Copy the lab (SQLite's online backup of lab.db, the blobs, the task secret, the ledger
    key) into DEST, then verify the copy. Exit 3 if the copy does not verify."""
    try:
        with Lab.open(lab) as opened:
            report = backup_lab(opened, dest, workspaces=workspaces, key=not no_key, deep=not quick)
    except LabDamaged as exc:
        report_user_error(UserError(f"cannot back up a damaged lab: {exc.message}", exc.hint))
        raise typer.Exit(EXIT_VERIFY_FAILED) from None
    except BackupFailed as exc:
        report_user_error(UserError(str(exc), "check the destination's free space and rights"))
        raise typer.Exit(EXIT_RUNTIME_FAILURE) from None
    if as_json:
        print_json(_as_json(report))
    else:
        _print(stdout_console(), report)
    if not report.verify.ok:
        raise typer.Exit(EXIT_VERIFY_FAILED)


def _as_json(report: BackupReport) -> dict[str, object]:
    return {
        "ok": report.verify.ok,
        "dest": str(report.dest),
        "lab_copy": str(report.lab_copy),
        "lab_id": report.lab_id,
        "files": report.files,
        "bytes": report.bytes,
        "key_copied": report.key_copied,
        "notes": report.notes,
        "verify": dataclasses.asdict(report.verify),
    }


def _print(console: Console, report: BackupReport) -> None:
    for note in report.notes + report.verify.warnings:
        console.print(Text(f"warning: {note}", style="yellow"), soft_wrap=True)
    if not report.verify.ok:
        console.print(Text(f"the copy in {report.dest} FAILED verification", style="bold red"))
        for problem in report.verify.problems:
            console.print(Text(f"- {problem}", style="red"), soft_wrap=True)
        console.print(
            Text("do not rely on it; run `rsilab verify` on the lab, then back up again"),
            soft_wrap=True,
        )
        return
    size = report.bytes / 2**20
    console.print(
        Text(
            f"backed up lab {report.lab_id} to {report.dest}: {report.files} files "
            f"({size:.1f} MiB) and lab.db, {report.verify.events} events; the copy verifies",
            style="green",
        ),
        soft_wrap=True,
    )
    if report.key_copied:
        console.print(
            Text(
                f"the ledger key is in {report.key_copy}: keep it apart from the copy "
                "(whoever holds it can re-sign an altered ledger)"
            ),
            soft_wrap=True,
        )
    console.print(
        Text(
            f"to restore: copy {report.lab_copy} to the lab's place and, if the key is missing "
            "there, the key file into the key folder (RSILAB_KEY_DIR); then `rsilab verify`",
            style="dim",
        ),
        soft_wrap=True,
    )


def register(app: typer.Typer) -> None:
    """Add ``backup`` to ``app``."""
    app.command("backup")(backup)
