"""``rsilab evolve``: improve a system over rounds, each round a campaign on what the last one
accepted (:mod:`rsilab.orchestrator.rounds`), then print and write the round report.

A harness improver (``self``, ``teacher``) runs through :mod:`rsilab.mcp.improver`, the
mechanism of ``rsilab agent``. Ctrl-C leaves the round's campaign and the evolution stopped:
with ``teacher:builtin`` the first lets running experiments finish and the second cancels
them (as for ``rsilab run``); with another improver the first stops the round at once.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from rsilab.cli._common import (
    EXIT_INTERRUPTED,
    EXIT_MEANINGS,
    EXIT_OK,
    EXIT_RUNTIME_FAILURE,
    TASK_HELP,
    JsonOption,
    LabOption,
    ctrl_c_requests,
    messages_console,
    print_json,
    report_user_error,
    stderr_console,
)
from rsilab.errors import RsilabError, UserError
from rsilab.records import Campaign, EndReason
from rsilab.store import Lab, Store

if TYPE_CHECKING:
    from rsilab.orchestrator.campaign import Progress
    from rsilab.orchestrator.rounds import EvolutionResult

IMPROVER_HELP = (
    "Who improves: self (the accepted system, through its harness's improve command), "
    "teacher (the starting system's harness, frozen), teacher:builtin, "
    "teacher:openai:MODEL or teacher:anthropic:MODEL."
)


def evolve(
    task_ref: Annotated[str, typer.Argument(metavar="TASK", help=TASK_HELP)],
    rounds: Annotated[int, typer.Option("--rounds", min=1, help="Rounds to run.")] = 3,
    improver: Annotated[str, typer.Option("--improver", help=IMPROVER_HELP)] = "self",
    budget: Annotated[
        str | None,
        typer.Option("--budget", help="Each round's budget, e.g. experiments=20,wall=10m."),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed",
            help="Seed of round 1 (then +1 a round), 0 to 2**21. Default: a fresh one, printed.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOption = False,
    lab: LabOption = None,
) -> None:
    """Improve TASK's system over --rounds rounds: each round runs a campaign on the current
    accepted system under the round's budget; the controller accepts or keeps the old
    version; the next round starts from what was accepted, in the same lab (records,
    findings and skills carry over).

    Under self the accepted system is the next round's improver; under teacher a fixed one
    is. At the end the round report (per round: version, per-benchmark final-tier scores and
    change against the start, tool calls, hours; and the improver's own score) is printed and
    written to LAB/reports/EVOLUTION.md. Ctrl-C leaves the evolution stopped (exit 130); a
    round whose campaign stopped on an error makes the exit status 1. With --json, stdout
    holds one JSON object instead of the report: the evolution, its rounds, the exit code.
    """
    from rsilab.cli.agent import _relay
    from rsilab.cli.run import _budget
    from rsilab.mcp.improver import improver_runner
    from rsilab.orchestrator.api import MAX_SEED, draw_seed
    from rsilab.orchestrator.rounds import EvolutionStop, parse_improver, run_rounds
    from rsilab.tasks import load_task

    graceful = not parse_improver(improver).kind.is_harness  # rsilab's runners drain
    task = load_task(task_ref)
    chosen = _budget(budget, task.budget)
    console = messages_console(as_json)
    if seed is not None and not 0 <= seed <= MAX_SEED:
        raise UserError(f"--seed {seed}: out of range", f"give --seed from 0 to {MAX_SEED}")
    if seed is None:
        seed = draw_seed()
        console.print(Text(f"seed {seed} (drawn; --seed {seed} repeats it)"), soft_wrap=True)
    stop = EvolutionStop()

    def line(p: Progress) -> None:
        console.print(Text(p.message), soft_wrap=True)

    with Lab.open(lab) as opened:
        # Where the round's runner drains (the built-in one) the third Ctrl-C aborts, as
        # for rsilab run; otherwise the first does.
        with ctrl_c_requests(stop.request, 3 if graceful else 1), _runtime_failure():
            result = run_rounds(
                opened,
                task,
                rounds=rounds,
                improver=improver,
                budget=chosen,
                seed=seed,
                run_improver=improver_runner(_relay),
                on_progress=line,
                stop=stop,
            )
        text, out = _write_report(opened, result.evolution_id)
        failed = _failed_rounds(opened.store, result)
    code = EXIT_INTERRUPTED if result.state == "stopped" and stop.asked else EXIT_OK
    code = code or (EXIT_RUNTIME_FAILURE if failed else EXIT_OK)
    if as_json:
        print_json(_summary_json(result, seed, out, code))
    else:
        sys.stdout.write("\n" + text)
        sys.stdout.flush()
        console.print(Text(f"report: {out}"), soft_wrap=True)
    if code != EXIT_INTERRUPTED:
        for said in failed:
            stderr_console().print(Text(f"error: {said}", style="bold red"), soft_wrap=True)
    if code:
        raise typer.Exit(code)


def _summary_json(result: EvolutionResult, seed: int, report: Path, code: int) -> dict[str, Any]:
    """``evolve --json``'s object: the evolution as it ended, each round, the exit code."""
    return {
        "evolution_id": result.evolution_id,
        "state": result.state,
        "start_id": result.start_id,
        "head_id": result.head_id,
        "seed": seed,
        "rounds": [r.model_dump(mode="json") for r in result.rounds],
        "message": result.message,
        "report": str(report),
        "exit_code": code,
        "exit_meaning": EXIT_MEANINGS[code],
    }


@contextlib.contextmanager
def _runtime_failure() -> Iterator[None]:
    """An error that ended the evolution (recorded on it and its round) becomes one
    ``error:`` line and exit 1; a UserError stays a usage error (exit 2)."""
    try:
        yield
    except UserError:
        raise
    except RsilabError as exc:
        report_user_error(
            UserError(
                f"the evolution stopped on an error: {type(exc).__name__}: {exc}",
                "fix the cause, then start a new evolution with `rsilab evolve`",
            )
        )
        raise typer.Exit(EXIT_RUNTIME_FAILURE) from None


def _failed_rounds(store: Store, result: EvolutionResult) -> list[str]:
    """A line for each round whose campaign stopped on an error (an LLM that kept failing):
    the evolution goes on past such a round, but its exit status says so."""
    ended = [(r.round, store.get_as(r.campaign_id, Campaign)) for r in result.rounds]
    return [
        f"round {number}'s campaign {c.id} stopped on an error: {c.end_detail}"
        for number, c in ended
        if c.end_reason is EndReason.ERROR
    ]


def _write_report(lab: Lab, evolution_id: str) -> tuple[str, Path]:
    """The round report as Markdown, written to ``<lab>/reports/<evolution>.md``."""
    from rsilab.cli.report import write_whole
    from rsilab.orchestrator.report import build_evolution_report, render_evolution_markdown

    text = render_evolution_markdown(build_evolution_report(lab.store, evolution_id))
    out = lab.path / "reports" / f"{evolution_id}.md"
    out.parent.mkdir(exist_ok=True)
    write_whole(out, text)
    return text, out


def register(app: typer.Typer) -> None:
    """Add ``evolve`` to ``app``."""
    app.command("evolve")(evolve)
