"""The Typer app: its help text, the error boundary, and the command groups it is made of."""

from __future__ import annotations

import os
import sys
from typing import Any

import click
import typer
from typer.core import TyperGroup
from typer.exceptions import TyperException

from rsilab.cli import (
    agent,
    backup,
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
    EXIT_RUNTIME_FAILURE,
    EXIT_USAGE,
    MARKUP,
    report_user_error,
)
from rsilab.errors import ConflictError, NotFoundError, RsilabError, UserError
from rsilab.sandbox.owners import sweep_dead_tmpdirs


class _RsilabGroup(TyperGroup):
    """A group that turns a person's mistakes into ``error:``/``hint:`` lines and exit code 2,
    a Ctrl-C that no command handled into exit code 130 (plain click answers 1), and any
    other error into one ``error:`` line and exit code 1: no traceback reaches a person
    unless ``RSILAB_DEBUG=1`` asks for it."""

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
        except _CLICK_OWN:
            raise  # usage errors (2) and explicit exits keep their codes
        except RsilabError as exc:  # a runtime failure rsilab names: one line, exit 1
            if os.environ.get(DEBUG_ENV) == "1":
                raise
            report_user_error(UserError(f"{type(exc).__name__}: {exc}", _DEBUG_HINT))
            raise typer.Exit(EXIT_RUNTIME_FAILURE) from None
        except Exception as exc:  # a bug: still no traceback unless asked for
            if os.environ.get(DEBUG_ENV) == "1":
                raise
            report_user_error(
                UserError(
                    f"internal error: {type(exc).__name__}: {exc} (this is a bug in rsilab)",
                    f"{_DEBUG_HINT}, and report it with that output",
                )
            )
            raise typer.Exit(EXIT_RUNTIME_FAILURE) from None


_CLICK_OWN = (
    typer.Exit,
    typer.Abort,
    TyperException,  # typer's own click: usage errors, bad parameters
    click.exceptions.Exit,
    click.ClickException,
    click.Abort,
)
"""What the command-line framework raises on purpose (typer vendors click in recent
versions and re-uses it in older ones), left to it."""

DEBUG_ENV = "RSILAB_DEBUG"
_DEBUG_HINT = f"run it again with {DEBUG_ENV}=1 to see the traceback"


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
backup.register(app)
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
    """Console entry point: run the app; a UserError that escapes a command prints, exit 2.

    First, temporary folders that killed rsilab processes left are removed (only those whose
    owner is certainly dead; see :mod:`rsilab.sandbox.owners`)."""
    sweep_dead_tmpdirs()
    try:
        app(prog_name="rsilab")
    except UserError as exc:
        report_user_error(exc)
        sys.exit(EXIT_USAGE)
