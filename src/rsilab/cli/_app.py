"""The Typer app: its help text, the error boundary, and the command groups it is made of."""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import os
import sys
from collections.abc import Sequence
from typing import Annotated, Any

import click
import rich.console
import typer
from typer.core import TyperGroup
from typer.exceptions import TyperException

from rsilab.cli import (
    agent,
    backup,
    campaign,
    doctor,
    evolve,
    export,
    guide,
    lab,
    ledger,
    memory,
    report,
    run,
    runtime,
    serve,
    task,
    token,
    tools,
    ui,
    versions,
)
from rsilab.cli._common import (
    EXIT_CODES_HELP,
    EXIT_DISK,
    EXIT_INTERRUPTED,
    EXIT_RUNTIME_FAILURE,
    EXIT_USAGE,
    MARKUP,
    report_user_error,
)
from rsilab.cli._stdio import ensure_standard_streams
from rsilab.errors import ConflictError, NotFoundError, RsilabError, UserError, write_refused
from rsilab.sandbox.owners import sweep_dead_tmpdirs


def _click_classes(name: str) -> tuple[type[Exception], ...]:
    """The exception class ``name`` of click and of the click that typer 0.2x vendors, where
    each has one (click 8.1 has no NoArgsIsHelpError)."""
    found = [getattr(click.exceptions, name, None)]
    with contextlib.suppress(ImportError):
        found.append(getattr(importlib.import_module("typer._click.exceptions"), name, None))
    return tuple(c for c in found if isinstance(c, type) and issubclass(c, Exception))


_USAGE_ERRORS = _click_classes("UsageError")
"""Click's usage errors (an unknown option or command, a bad value, a missing argument)."""
_NO_ARGS_IS_HELP = _click_classes("NoArgsIsHelpError")
"""What a group given no command raises: click prints the help (exit 2), left to it."""


def _report_usage_error(exc: Exception, root: Any = None, tokens: Sequence[str] = ()) -> typer.Exit:
    """Click's usage error as rsilab's ``error:`` and ``hint:`` lines (not click's framed
    box), the hint naming the help of the command it was given to (``tokens``: the root's
    arguments): the exit (2) to raise."""
    ctx = getattr(exc, "ctx", None)
    where = ctx.command_path if ctx is not None else _command_path(root, list(tokens))
    message = " ".join(str(getattr(exc, "format_message", exc.__str__)()).split())
    report_user_error(UserError(message, f"see `{where} --help`"))
    return typer.Exit(EXIT_USAGE)


def _arguments(ctx: Any) -> list[str]:
    """The arguments a group's context holds before it invokes its command."""
    # click 8.2+ keeps the command's name in _protected_args (protected_args warns there).
    first = getattr(ctx, "_protected_args", None)
    return [*(ctx.protected_args if first is None else first), *ctx.args]


def _command_path(root: Any, tokens: list[str]) -> str:
    """The command ``tokens`` (the root's arguments) name, as ``rsilab campaign list``: for an
    error that click raised without its command's context (a flag given a value)."""
    if root is None:
        return "rsilab"
    command, path = root.command, [root.command_path]
    while tokens and hasattr(command, "get_command"):
        command = command.get_command(root, tokens.pop(0))
        if command is None:
            break
        path.append(command.name)
    return " ".join(path)


class _RsilabGroup(TyperGroup):
    """A group that turns a person's mistakes into ``error:``/``hint:`` lines and exit code 2
    (click's own usage errors included), a Ctrl-C that no command handled into exit code 130
    (plain click answers 1), a disk that refused a write into exit code 74, and any other
    error into one ``error:`` line and exit code 1: no traceback reaches a person unless
    ``RSILAB_DEBUG=1`` asks for it.

    The rule (docs/cli.md): a usage error is one a person fixes by changing what they typed
    or the files it names (raise ``UserError``); a runtime failure is a right command whose
    work failed (any other error)."""

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        """The root's context; a usage error in the root's own options reads as any other."""
        try:
            return super().make_context(*args, **kwargs)
        except BrokenPipeError:  # `rsilab --help | head`
            raise _reader_gone() from None
        except _NO_ARGS_IS_HELP:
            raise
        except _USAGE_ERRORS as exc:
            raise _report_usage_error(exc) from None

    def invoke(self, ctx: Any) -> Any:  # typer does not export the Context type it passes
        tokens = _arguments(ctx)  # click empties them as it goes on
        try:
            return super().invoke(ctx)
        except _NO_ARGS_IS_HELP:
            raise  # a group given no command: click prints its help, exit 2
        except _USAGE_ERRORS as exc:
            raise _report_usage_error(exc, ctx, tokens) from None
        except KeyboardInterrupt:
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except BrokenPipeError:  # `rsilab show X | head -1`: the reader is done, not a bug
            raise _reader_gone() from None
        except _CLICK_OWN:
            raise  # usage errors (2) and explicit exits keep their codes
        except Exception as exc:
            raise _failed(exc) from None


def _failed(exc: Exception) -> typer.Exit:
    """The exit for an error a command let out, its lines printed: a disk that refused a
    write (full, over quota, read-only) wherever in ``exc``'s chain, exit 74; a person's
    mistake, exit 2; any other error, one line and exit 1 (re-raised with RSILAB_DEBUG=1)."""
    refused = write_refused(exc)
    if refused is not None:
        report_user_error(refused)
        return typer.Exit(EXIT_DISK)
    if isinstance(exc, UserError):
        report_user_error(exc)
        return typer.Exit(EXIT_USAGE)
    if isinstance(exc, NotFoundError | ConflictError):  # store errors read as user errors here
        report_user_error(UserError(str(exc)))
        return typer.Exit(EXIT_USAGE)
    if os.environ.get(DEBUG_ENV) == "1":
        raise exc
    if isinstance(exc, RsilabError):  # a runtime failure rsilab names: one line, exit 1
        report_user_error(UserError(f"{type(exc).__name__}: {exc}", _DEBUG_HINT))
    else:  # a bug: still no traceback unless asked for
        report_user_error(
            UserError(
                f"internal error: {type(exc).__name__}: {exc} (this is a bug in rsilab)",
                f"{_DEBUG_HINT}, and report it with that output",
            )
        )
    return typer.Exit(EXIT_RUNTIME_FAILURE)


EXIT_PIPE_CLOSED = 141
"""Exit status when the reader of stdout went away (``rsilab versions X | head -3``): what a
shell reports for a Unix tool killed by SIGPIPE (128 + 13), with nothing printed."""


def _reader_gone() -> typer.Exit:
    """Quietly end a command whose stdout reader closed the pipe (exit 141, as Unix tools do).

    stdout is pointed at /dev/null first, so the flush at exit cannot fail a second time
    (Python would print "Exception ignored ... BrokenPipeError")."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return typer.Exit(EXIT_PIPE_CLOSED)


def _rich_reader_gone(console: rich.console.Console) -> None:
    console.quiet = True
    raise _reader_gone()


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


def _version() -> str:
    """rsilab's version from the installed package's metadata."""
    try:
        return importlib.metadata.version("rsilab")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        from rsilab import __version__

        return __version__


def _print_version(asked: bool) -> None:
    if asked:
        typer.echo(f"rsilab {_version()}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            is_eager=True,
            callback=_print_version,
            help="Print `rsilab VERSION` and exit.",
        ),
    ] = False,
) -> None:
    # No docstring: the app's help above stays the root's help.
    pass


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
export.register(app)
memory.register(app)
ui.register(app)
token.register(app)


def main() -> None:
    """Console entry point: run the app; a UserError that escapes a command prints, exit 2.

    First, temporary folders that killed rsilab processes left are removed (only those whose
    owner is certainly dead; see :mod:`rsilab.sandbox.owners`). Before that, a standard stream
    the launcher closed is opened on /dev/null (see :mod:`rsilab.cli._stdio`), and a current
    folder that no longer exists ends the command with one line, exit 2."""
    ensure_standard_streams()
    try:
        os.getcwd()
    except FileNotFoundError:  # every relative path would resolve against a folder gone
        report_user_error(
            UserError(
                "the current folder no longer exists (it was deleted or moved after this "
                "shell entered it)",
                "cd to a folder that exists and run the command again",
            )
        )
        sys.exit(EXIT_USAGE)
    sweep_dead_tmpdirs()
    # Rich (help pages, tables) ends a broken pipe itself with exit 1, the code of a runtime
    # failure; its documented hook is overridden so every closed pipe ends the same way.
    rich.console.Console.on_broken_pipe = _rich_reader_gone  # type: ignore[method-assign,assignment]
    try:
        app(prog_name="rsilab")
    except BrokenPipeError:  # raised outside a command (click's own help or output)
        sys.exit(_reader_gone().exit_code)
    except UserError as exc:
        report_user_error(exc)
        sys.exit(EXIT_USAGE)
