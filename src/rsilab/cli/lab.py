"""``rsilab init`` (create a lab), ``rsilab schema`` (the record JSON Schemas) and
``rsilab lab migrate`` (copy a SQLite lab into PostgreSQL)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from rsilab.cli._common import (
    EXIT_VERIFY_FAILED,
    LabOption,
    UnusedLabOption,
    print_json,
    stdout_console,
)
from rsilab.errors import UserError
from rsilab.records import json_schemas
from rsilab.store import Lab
from rsilab.store.keys import key_dir


def init(lab: LabOption = None) -> None:
    """Create a new lab: the ledger database, the artifact folder and the ledger key."""
    with Lab.init(lab) as created:
        lab_id = created.store.lab_id
        path = created.path.resolve()
    console = stdout_console()
    console.print(Text(f"created lab {lab_id} at {path}", style="green"), soft_wrap=True)
    console.print(Text(f"ledger key: {_key_location(lab_id)}"), soft_wrap=True)
    console.print(
        Text(
            "keep the key outside the lab and back it up: `rsilab verify` needs it "
            "to check the signed checkpoints",
            style="dim",
        ),
        soft_wrap=True,
    )


def _key_location(lab_id: str) -> str:
    if os.environ.get("RSILAB_LEDGER_KEY"):
        return "taken from RSILAB_LEDGER_KEY (no key file written)"
    return str(key_dir() / f"{lab_id}.key")


def schema(
    out: Annotated[
        Path | None,
        typer.Option("--out", metavar="FILE", help="Write here instead of stdout."),
    ] = None,
    lab: UnusedLabOption = None,
) -> None:
    """Print (or write) the JSON Schema of every record type, with the schema version."""
    schemas = json_schemas()
    if out is None:
        print_json(schemas)
        return
    try:
        out.write_text(json.dumps(schemas, indent=2, ensure_ascii=False) + "\n", "utf-8")
    except OSError as exc:
        raise UserError(
            f"cannot write {out}: {exc.strerror or exc}", "choose a writable path with --out"
        ) from exc
    stdout_console().print(Text(f"wrote {out}"), soft_wrap=True)


def migrate(
    src: Annotated[str, typer.Argument(metavar="SRC", help="The SQLite lab folder to copy.")],
    dest: Annotated[
        str,
        typer.Argument(
            metavar="DEST",
            help="postgresql://USER@HOST/DB?artifacts=FOLDER: an empty database, a new folder.",
        ),
    ],
) -> None:
    """Copy a SQLite lab into PostgreSQL (events, records, checkpoints, artifacts) and verify
    the copy. The lab keeps its id, so its ledger key verifies both. Exit 3 if the copy does
    not verify."""
    from rsilab.store._pg_copy import copy_to_postgres  # loads the PostgreSQL driver

    with Lab.open(src) as source:
        report = copy_to_postgres(source, dest)
    console = stdout_console()
    console.print(
        Text(
            f"copied lab {report.lab_id}: {report.events} events, {report.records} records, "
            f"{report.checkpoints} checkpoints, {report.files} files",
        ),
        soft_wrap=True,
    )
    if not report.verify.ok:
        for problem in report.verify.problems:
            console.print(Text(f"problem: {problem}", style="red"), soft_wrap=True)
        console.print(Text("the copy does NOT verify", style="bold red"), soft_wrap=True)
        raise typer.Exit(EXIT_VERIFY_FAILED)
    console.print(Text("the copy verifies", style="green"), soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add ``init``, ``schema`` and ``lab migrate`` to ``app``."""
    app.command("init")(init)
    app.command("schema")(schema)
    lab_app = typer.Typer(help="Manage a lab's storage.", no_args_is_help=True)
    lab_app.command("migrate")(migrate)
    app.add_typer(lab_app, name="lab")
