"""``rsilab runtime install|show``: the venv harnesses run in (see rsilab.sandbox.runtime)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from rsilab.cli._common import (
    MARKUP,
    UnusedLabOption,
    print_json,
    stderr_console,
    stdout_console,
)
from rsilab.sandbox.runtime import (
    current_runtime,
    install_runtime,
    requirement_lines,
    requirements_text,
)

runtime_app = typer.Typer(
    help="The runtime environment sandboxed jobs run in.",
    no_args_is_help=True,
    rich_markup_mode=MARKUP,
)


@runtime_app.command("install")
def install(
    force: Annotated[bool, typer.Option("--force", help="Delete and rebuild it.")] = False,
    lab: UnusedLabOption = None,
) -> None:
    """Create the runtime venv and install the harness libraries (quick if already done).

    torch comes first, pinned to the CPU build; then the rest of the requirements file.
    """
    console = stderr_console()
    runtime = install_runtime(force=force, log=lambda line: console.print(Text(line)))
    typer.echo(str(runtime.path))


@runtime_app.command("show")
def show(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    lab: UnusedLabOption = None,
) -> None:
    """Print where the runtime lives, whether it is installed, and what it holds."""
    runtime = current_runtime()
    installed = runtime.is_installed()
    packages = runtime.packages() if installed else []
    if as_json:
        print_json(
            {
                "path": str(runtime.path),
                "installed": installed,
                "requirements": requirement_lines(requirements_text()),
                "packages": dict(packages),
            }
        )
        return
    console = stdout_console()
    console.print(Text(f"path: {runtime.path}"))
    console.print(Text(f"installed: {'yes' if installed else 'no (run `rsilab runtime install`)'}"))
    console.print(Text(f"requirements: {', '.join(requirement_lines(requirements_text()))}"))
    if packages:
        table = Table("package", "version")
        for name, version in packages:
            table.add_row(Text(name), Text(version))
        console.print(table)


def register(app: typer.Typer) -> None:
    """Add the ``runtime`` group to ``app``."""
    app.add_typer(runtime_app, name="runtime")
