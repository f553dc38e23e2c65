"""What every command shares: exit codes, the ``--lab`` option, consoles and error output."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.text import Text

from rsilab.errors import UserError
from rsilab.records import EndReason

EXIT_OK = 0
EXIT_RUNTIME_FAILURE = 1
EXIT_USAGE = 2
EXIT_VERIFY_FAILED = 3
EXIT_DISK = 74  # sysexits.h EX_IOERR: 4 once meant a tool's error, so it is not reused
EXIT_INTERRUPTED = 130

TASK_HELP = "Task: a name, a task.toml or its folder, or file.py[:NAME]."
"""How a command's TASK argument may name a task (what ``load_task`` accepts)."""

EXIT_CODES_HELP = """Exit codes (every command):

* 0: done
* 1: runtime failure, or a campaign that stopped on an error (a tool's error for `rsilab call`)
* 2: usage error: bad arguments, a bad task file, no such lab or campaign (a message and a
  hint on stderr)
* 3: verification failure (`rsilab verify` found the ledger or records altered)
* 74: the disk refused a write (no space left, a quota spent, a read-only filesystem): what was
  recorded before is kept; free space, then run the command again (`rsilab resume CAMPAIGN`)
* 130: interrupted (Ctrl-C; a campaign is left stopped and resumable)
* 141: the reader of stdout went away (`| head`), as a shell reports a tool ended by SIGPIPE"""
"""The exit codes, as markdown for the app's help."""

EXIT_MEANINGS = {
    EXIT_OK: "done",
    EXIT_RUNTIME_FAILURE: "runtime failure",
    EXIT_USAGE: "usage error",
    EXIT_VERIFY_FAILED: "verification failure",
    EXIT_DISK: "the disk refused a write",
    EXIT_INTERRUPTED: "interrupted",
}
"""Each exit code in a few words, as ``--json`` summaries name the code they exit with."""

MARKUP: Literal["markdown"] = "markdown"
"""Help text is markdown: single newlines inside a paragraph are joined."""

_LAB_HELP = (
    "Lab folder, or postgresql://USER@HOST/DB?artifacts=DIR. Default: $RSILAB_LAB, else ./.rsilab."
)

LabOption = Annotated[
    Path | None,
    typer.Option("--lab", metavar="DIR|URL", help=_LAB_HELP, show_default=False),
]
"""``--lab DIR`` for commands that open a lab; ``None`` means resolve_lab_path's default."""

UnusedLabOption = Annotated[
    Path | None,
    typer.Option("--lab", metavar="DIR", hidden=True, help="Accepted for uniformity; unused."),
]
"""``--lab`` on commands that need no lab, so scripts may pass it to every command."""

JsonOption = Annotated[
    bool,
    typer.Option(
        "--json", help="Print JSON on stdout (messages go to stderr), so it parses when piped."
    ),
]
"""``--json``: the command's output as plain JSON on stdout; see :func:`print_json`."""

CampaignOption = Annotated[
    str | None,
    typer.Option(
        "--campaign", metavar="ID|latest", help="Campaign id, or 'latest'.", show_default=False
    ),
]

# Wide enough that ids and hashes in tables are never cut when output goes to a file or pipe.
_PIPE_WIDTH = 200


def stdout_console() -> Console:
    """A Rich console on the current stdout (looked up now, so test runners can capture it)."""
    width = None if sys.stdout.isatty() else _PIPE_WIDTH
    return Console(file=sys.stdout, width=width, highlight=False)


def stderr_console() -> Console:
    """A Rich console on the current stderr."""
    return Console(file=sys.stderr, highlight=False)


def print_json(value: Any, *, line: bool = False) -> None:
    """Plain JSON (no Rich markup) on stdout, so it always parses: indented by 2 spaces, or
    with ``line`` on one line (JSON Lines, for a stream such as ``rsilab log --follow``)."""
    encoding = (sys.stdout.encoding or "").lower().replace("-", "")
    ascii_only = encoding != "utf8"
    text = json.dumps(value, ensure_ascii=ascii_only, indent=None if line else 2)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def messages_console(as_json: bool) -> Console:
    """Where a command's progress and messages go: stdout, or stderr when stdout holds JSON."""
    return stderr_console() if as_json else stdout_console()


def report_user_error(exc: UserError) -> None:
    """``error: ...`` in red and ``hint: ...`` on stderr, one line each, no traceback."""
    console = stderr_console()
    console.print(Text(f"error: {exc.message}", style="bold red"), soft_wrap=True)
    if exc.hint:
        console.print(Text(f"hint: {exc.hint}", style="yellow"), soft_wrap=True)


@contextlib.contextmanager
def reading_stored_data() -> Iterator[None]:
    """Turn stored text that no longer parses (edited outside rsilab) into a UserError."""
    try:
        yield
    except (ValidationError, json.JSONDecodeError) as exc:
        raise UserError(
            f"the lab holds an event or record that does not parse ({type(exc).__name__}); "
            "it was probably edited outside rsilab",
            "run `rsilab verify` to find the first bad event",
        ) from exc


@contextlib.contextmanager
def ctrl_c_requests(request: Callable[[], int], abort_at: int) -> Iterator[None]:
    """While inside, SIGINT calls ``request`` (a stop request's escalation, returning the
    level reached) and raises KeyboardInterrupt once that level is ``abort_at``. SIGTERM, what
    a service manager or a scheduler sends before it kills, escalates at once to the level
    that cancels running jobs (2) and stops as cleanly as a second Ctrl-C: the campaign is
    left stopped and resumable, not interrupted. A signal this process was started with
    ignored stays ignored. On a thread other than the main one (where no handler can be set)
    Python's defaults stay."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_interrupt(signum: int, frame: object) -> None:
        if request() >= abort_at:
            raise KeyboardInterrupt

    def on_terminate(signum: int, frame: object) -> None:
        level = request()
        while level < min(2, abort_at):
            level = request()
        if level >= abort_at:
            raise KeyboardInterrupt

    # A signal ignored when rsilab started stays ignored, as a shell and Python itself leave
    # it: `rsilab run ... &` from a script, or under nohup, must not stop at a Ctrl-C the
    # terminal sends its whole process group.
    wanted = {signal.SIGINT: on_interrupt, signal.SIGTERM: on_terminate}
    previous = {
        signum: signal.signal(signum, handler)
        for signum, handler in wanted.items()
        if signal.getsignal(signum) is not signal.SIG_IGN
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def exit_code_for(end_reason: EndReason | None) -> int:
    """The exit code of a command whose campaign run ended for ``end_reason``: 130 when a
    person stopped it, 1 when an error, its failing experiments, its baseline or an LLM
    endpoint out of reach did, else 0."""
    if end_reason is EndReason.STOPPED_BY_USER:
        return EXIT_INTERRUPTED
    failed = (
        EndReason.ERROR,
        EndReason.EXPERIMENTS_FAILING,
        EndReason.PREFLIGHT_FAILED,
        EndReason.LLM_UNAVAILABLE,
    )
    if end_reason in failed:
        return EXIT_RUNTIME_FAILURE
    return EXIT_OK
