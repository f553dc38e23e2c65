"""The Typer app: its help text, the error boundary, and the command groups it is made of."""

from __future__ import annotations

import sys
from typing import Any

import typer
from typer.core import TyperGroup

from rsilab.cli import (
    agent,
    campaign,
    doctor,
    evolve,
    guide,
    lab,
    ledger,
    memory,
    report,
    run,
    runtime,
    serve,
    task,
    tools,
    ui,
    versions,
)
from rsilab.cli._common import (
    EXIT_CODES_HELP,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    MARKUP,
    report_user_error,
)
from rsilab.errors import ConflictError, NotFoundError, UserError


class _RsilabGroup(TyperGroup):
    """A group that turns a person's mistakes into ``error:``/``hint:`` lines and exit code 2,
    and a Ctrl-C that no command handled into exit code 130 (plain click answers 1)."""

    def invoke(self, ctx: Any) -> Any:  # typer does not export the Context type it passes
        try:
            return super().invoke(ctx)
        except UserError as exc:
            report_user_error(exc)
            raise typer.Exit(EXIT_USAGE) from exc
        except (NotFoundError, ConflictError) as exc:  # store errors read as user errors here
            report_user_error(UserError(str(exc)))
            raise typer.Exit(EXIT_USAGE) from exc
        except KeyboardInterrupt:
            raise typer.Exit(EXIT_INTERRUPTED) from None


app = typer.Typer(
    cls=_RsilabGroup,
    name="rsilab",
    help=(
        "rsilab: agents improve an AI system through audited tools; "
        "every action lands in a hash-chained ledger.\n\n" + EXIT_CODES_HELP
    ),
    no_args_is_help=True,
    rich_markup_mode=MARKUP,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)
lab.register(app)
campaign.register(app)
tools.register(app)
ledger.register(app)
serve.register(app)
agent.register(app)
runtime.register(app)
doctor.register(app)
task.register(app)
versions.register(app)
run.register(app)
evolve.register(app)
guide.register(app)
report.register(app)
memory.register(app)
ui.register(app)


def main() -> None:
    """Console entry point: run the app; a UserError that escapes a command prints, exit 2."""
    try:
        app(prog_name="rsilab")
    except UserError as exc:
        report_user_error(exc)
        sys.exit(EXIT_USAGE)
