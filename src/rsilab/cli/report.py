"""``rsilab report CAMPAIGN``: what a campaign did and used (or an evolution's round report),
as Markdown, JSON or one self-contained HTML file."""

from __future__ import annotations

import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from rsilab.cli._common import LabOption, print_json, reading_stored_data
from rsilab.errors import REFUSALS, NotFoundError, UserError, WriteRefused
from rsilab.expos.campaigns import find_campaign
from rsilab.records import Evolution, Model
from rsilab.store import Lab


class ReportFormat(StrEnum):
    """Output formats of ``rsilab report``."""

    MD = "md"
    JSON = "json"
    HTML = "html"


def report(
    campaign: Annotated[
        str,
        typer.Argument(
            metavar="CAMPAIGN", help="Campaign id, or 'latest'; or an evolution id (evo-...)."
        ),
    ],
    fmt: Annotated[
        ReportFormat | None,
        typer.Option(
            "--format",
            help="md, json or html. Default: from --out's suffix (.json, .html), else md.",
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            metavar="PATH",
            help="Write the report to PATH (and print only PATH) instead of printing it.",
            show_default=False,
        ),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            metavar="PATH",
            help="Write the report as one self-contained HTML file (the dashboard's pages of "
            "the campaign, offline) to PATH; the same as --format html --out PATH.",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="The same as --format json.", show_default=False)
    ] = False,
    lab: LabOption = None,
) -> None:
    """The campaign's report: the DAG of directions with status and evidence, accepted
    versions with final-tier scores and intervals against the baseline, rejected candidates
    with reasons, protocol flags by stage, resources used, and lock-in measures.

    Works on a running campaign too; it only reads the lab. Given an evolution id
    (`rsilab evolve`), the evolution's round report instead.
    """
    if as_json:
        if fmt not in (None, ReportFormat.JSON) or html is not None:
            raise UserError(
                "--json writes JSON; it cannot be combined with --format or --html",
                "drop --format/--html, or give --format json",
            )
        fmt = ReportFormat.JSON
    if html is not None:
        if out is not None and out != html:
            raise UserError("give either --html PATH or --out PATH, not both")
        if fmt not in (None, ReportFormat.HTML):
            raise UserError(f"--html writes HTML; it cannot be combined with --format {fmt}")
        out, fmt = html, ReportFormat.HTML
    chosen = fmt or _format_of(out)
    if out is not None:
        _check_out(out)
    with Lab.open(lab, read_only=True) as opened, reading_stored_data():
        if chosen is ReportFormat.HTML:
            page = _html(opened, campaign)
            if out is None:
                sys.stdout.write(page)
                sys.stdout.flush()
            else:
                write_whole(out, page)
                typer.echo(str(out))
            return
        built, markdown = _build(opened, campaign)
    if chosen is ReportFormat.JSON:
        if out is None:
            print_json(built.model_dump(mode="json"))
            return
        text = built.model_dump_json(indent=2) + "\n"
    else:
        text = markdown
        if out is None:
            sys.stdout.write(text)
            sys.stdout.flush()
            return
    write_whole(out, text)
    typer.echo(str(out))


def _format_of(out: Path | None) -> ReportFormat:
    """The format a file name asks for: .json, .html/.htm, else Markdown."""
    suffix = out.suffix.lower() if out is not None else ""
    if suffix == ".json":
        return ReportFormat.JSON
    if suffix in {".html", ".htm"}:
        return ReportFormat.HTML
    return ReportFormat.MD


def _html(lab: Lab, ref: str) -> str:
    """A campaign's one-file HTML report (evolutions have none: their report is a table)."""
    from rsilab.web.report_html import render_campaign_html

    if ref.startswith(f"{Evolution.PREFIX}-"):
        raise UserError(
            "an evolution's report is Markdown or JSON only",
            "write the HTML report of one of its campaigns (listed in its report)",
        )
    return render_campaign_html(lab, find_campaign(lab.store, ref).id)


def _build(lab: Lab, ref: str) -> tuple[Model, str]:
    """The report of a campaign, or of an evolution (``evo-...``), and its Markdown."""
    from rsilab.orchestrator.report import (
        build_evolution_report,
        build_report,
        render_evolution_markdown,
        render_markdown,
    )

    if ref.startswith(f"{Evolution.PREFIX}-"):
        try:
            evolution = build_evolution_report(lab.store, ref)
        except NotFoundError:
            raise UserError(
                f"no evolution {ref!r} in this lab", "its id is printed by `rsilab evolve`"
            ) from None
        return evolution, render_evolution_markdown(evolution)
    found = find_campaign(lab.store, ref)
    report = build_report(lab.store, found.id)
    return report, render_markdown(report)


def _check_out(out: Path) -> None:
    """Refuse a PATH that cannot be written, before any work is done."""
    if out.is_dir():
        raise UserError(f"--out {out}: is a folder", "give a file path, e.g. --out report.md")
    if not out.parent.is_dir():
        raise UserError(
            f"--out {out}: folder {out.parent} does not exist",
            f"create it first (mkdir -p {out.parent}) or pick another path",
        )


def write_whole(out: Path, text: str) -> None:
    """Write ``text`` to ``out`` whole: a reader never sees half a report (WriteRefused when
    the disk refuses it, UserError when it cannot be written for another reason)."""
    partial = out.with_name(f".{out.name}.{os.getpid()}.partial")
    try:
        partial.write_text(text, encoding="utf-8")
        partial.replace(out)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        if exc.errno in REFUSALS:  # the disk's refusal, named by the file asked for
            raise WriteRefused.of(out, exc.errno) from exc
        raise UserError(f"--out {out}: cannot write it ({exc.strerror or exc})") from exc


def register(app: typer.Typer) -> None:
    """Add ``report`` to ``app``."""
    app.command("report")(report)
