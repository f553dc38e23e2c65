"""``rsilab task check`` (every problem of a task) and ``rsilab task list`` (the built-ins)."""

from __future__ import annotations

import secrets
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from rsilab.cli._common import MARKUP, LabOption, stderr_console, stdout_console
from rsilab.store.lab import DB_NAME, resolve_lab_path
from rsilab.tasks import (
    ExperimentFailed,
    Task,
    check_task,
    get_task,
    lab_secret,
    load_task,
    run_experiment,
    task_names,
)

EXIT_PROBLEMS = 2  # a bad task file is a usage error

task_app = typer.Typer(
    help="Tasks: what to improve and how it is judged.",
    no_args_is_help=True,
    rich_markup_mode=MARKUP,
)


def _secret(lab: LabOption) -> tuple[bytes, str]:
    """The lab's split secret when a lab is there, else a throwaway one."""
    folder = resolve_lab_path(lab)
    if (folder / DB_NAME).exists():
        return lab_secret(folder), f"splits drawn with the secret of the lab at {folder}"
    return secrets.token_bytes(32), "no lab found: splits drawn with a throwaway secret"


@task_app.command("check")
def check(
    ref: Annotated[str, typer.Argument(metavar="PATH|NAME", help="task.toml, a .py, or a name.")],
    probe: Annotated[
        bool, typer.Option("--probe/--no-probe", help="Search for private data in the sandbox.")
    ] = True,
    probe_seconds: Annotated[
        float, typer.Option("--probe-seconds", min=1.0, help="Time bound of that search.")
    ] = 30.0,
    lab: LabOption = None,
) -> None:
    """Validate a task and print every problem found; exit 2 when there is an error.

    Checks the spec (types, scorers, budget), the harness folder and its harness.toml, every
    benchmark's splits (present, non-empty, private tiers disjoint from train and dev), and,
    inside the sandbox with the harness as workspace, whether any private item, the lab's
    secret or a declared data source can be read from there.
    """
    task = load_task(ref)
    secret, note = _secret(lab)
    err = stderr_console()
    err.print(Text(f"checking task {task.name!r} ({task.source or ref}); {note}", style="dim"))
    sandbox = None
    if probe:
        from rsilab.sandbox.select import choose_sandbox

        choice = choose_sandbox()
        sandbox = choice.sandbox
        err.print(Text(f"sandbox: {sandbox.name} ({choice.why})", style="dim"))
        if not sandbox.is_security_boundary:
            err.print(Text("this sandbox is no security boundary: expect leaks", style="yellow"))
    try:
        problems = check_task(task, sandbox, secret, probe_seconds=probe_seconds)
    finally:
        if sandbox is not None:
            sandbox.close()
    out = stdout_console()
    for problem in problems:
        style = "red" if problem.severity == "error" else "yellow"
        out.print(Text(str(problem), style=style), soft_wrap=True)
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        out.print(Text(f"{len(errors)} error(s) found", style="bold red"))
        raise typer.Exit(EXIT_PROBLEMS)
    out.print(Text(f"ok: task {task.name!r} has no errors", style="green"))


def _measure(task: Task) -> str:
    from rsilab.sandbox.select import default_sandbox

    sandbox = default_sandbox()
    try:
        outcome = run_experiment(task, sandbox, secrets.token_bytes(32))
    except ExperimentFailed as exc:
        return f"failed: {exc}"
    finally:
        sandbox.close()
    return f"{outcome.seconds:.2f} (measured, {sandbox.name})"


@task_app.command("list")
def list_tasks(
    measure: Annotated[
        bool, typer.Option("--measure", help="Run one train+predict on dev per task, timed.")
    ] = False,
) -> None:
    """The built-in tasks with their benchmarks and seconds per experiment.

    Without ``--measure`` the seconds shown are the figure recorded in the task (the last
    measurement by its authors, on a 2-core machine).
    """
    table = Table("task", "description", "benchmarks", "s / experiment")
    for name in task_names():
        task = get_task(name)
        benches = ", ".join(
            f"{b.name} ({b.scorer}{', target' if b.target else ''})" for b in task.benchmarks
        )
        if measure:
            seconds = _measure(task)
        else:
            recorded = task.seconds_per_experiment
            seconds = "not measured" if recorded is None else f"{recorded:.2f} (recorded)"
        table.add_row(name, task.description, benches, seconds)
    stdout_console().print(table)


def register(app: typer.Typer) -> None:
    """Add the ``task`` group to ``app``."""
    app.add_typer(task_app, name="task")
