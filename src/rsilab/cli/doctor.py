"""``rsilab doctor``: which sandbox jobs would run in, and what it isolates."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from rsilab.cli._common import UnusedLabOption, print_json, stdout_console
from rsilab.errors import UserError
from rsilab.sandbox.runtime import current_runtime
from rsilab.sandbox.select import choose_sandbox

PROPERTIES = ("filesystem", "network", "user", "limits", "disk", "cgroups")

_MEANING_SAFE = (
    "Jobs cannot read the lab, private test splits, rsilab's source or other jobs' files, "
    "cannot reach the network, and cannot exceed their limits: the improver may be untrusted."
)
_MEANING_UNSAFE = (
    "Jobs run as plain processes: they can read the lab and private test splits and reach the "
    "network. Run only code you trust, or install bubblewrap (`make system-deps` as root) and "
    "the runtime (`rsilab runtime install`)."
)


def _properties(lines: list[str]) -> list[dict[str, str]]:
    """Parse ``<property>: <yes|no|partly> - <detail>`` lines of Sandbox.describe()."""
    found: dict[str, dict[str, str]] = {}
    for line in lines[1:]:
        name, _, rest = line.partition(":")
        answer, _, detail = rest.strip().partition(" - ")
        found[name.strip()] = {"property": name.strip(), "answer": answer, "detail": detail}
    return [
        found.get(p, {"property": p, "answer": "no", "detail": "not reported"}) for p in PROPERTIES
    ]


def diagnose() -> dict[str, Any]:
    """Everything ``rsilab doctor`` prints, as JSON-safe data."""
    runtime = current_runtime()
    report: dict[str, Any] = {
        "runtime": {"path": str(runtime.path), "installed": runtime.is_installed()},
    }
    try:
        choice = choose_sandbox()
    except UserError as exc:
        report.update(sandbox=None, security_boundary=False, why=str(exc), properties=[])
        report["meaning"] = "No job can run until this is fixed."
        return report
    sandbox = choice.sandbox
    report.update(
        sandbox=sandbox.name,
        security_boundary=sandbox.is_security_boundary,
        why=choice.why + (f": {choice.bwrap_problem}" if choice.bwrap_problem else ""),
        summary=sandbox.describe()[0],
        properties=_properties(sandbox.describe()),
        meaning=_MEANING_SAFE if sandbox.is_security_boundary else _MEANING_UNSAFE,
    )
    sandbox.close()
    return report


def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    lab: UnusedLabOption = None,
) -> None:
    """Say which sandbox jobs run in, what it isolates (yes/no), and what that means."""
    report = diagnose()
    if as_json:
        print_json(report)
        return
    console = stdout_console()
    name = report["sandbox"] or "none"
    style = "green" if report["security_boundary"] else "bold red"
    console.print(Text(f"sandbox: {name}", style=style))
    console.print(Text(f"why: {report['why']}"))
    if report["properties"]:
        table = Table("isolation", "", "detail")
        for prop in report["properties"]:
            good = prop["answer"] == "yes"
            table.add_row(
                prop["property"],
                Text(prop["answer"], style="green" if good else "red"),
                prop["detail"],
            )
        console.print(table)
    runtime = report["runtime"]
    state = "installed" if runtime["installed"] else "not installed (run `rsilab runtime install`)"
    console.print(Text(f"runtime: {runtime['path']} ({state})"))
    console.print(Text(f"meaning: {report['meaning']}"))


def register(app: typer.Typer) -> None:
    """Add ``doctor`` to ``app``."""
    app.command("doctor")(doctor)
