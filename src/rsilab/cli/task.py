"""``rsilab task init`` (a new task folder), ``task check`` (every problem of a task) and
``task list`` (the built-ins)."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from rsilab.cli._common import MARKUP, LabOption, print_json, stderr_console, stdout_console
from rsilab.sandbox.base import Sandbox
from rsilab.sandbox.runtime import Runtime, RuntimeMissingError
from rsilab.store.lab import lab_exists, resolve_lab_path
from rsilab.tasks import (
    TASK_KINDS,
    ExperimentFailed,
    Problem,
    Task,
    TaskLoadError,
    check_run,
    check_task,
    check_toml,
    describe_limits,
    get_task,
    init_task,
    lab_secret,
    load_task,
    metric_order,
    run_experiment,
    shown_order,
    task_names,
)

EXIT_PROBLEMS = 2  # a bad task file is a usage error

task_app = typer.Typer(
    help="Tasks: what to improve and how it is judged.",
    no_args_is_help=True,
    rich_markup_mode=MARKUP,
)


def _secret(lab: LabOption) -> tuple[bytes, str]:
    """The lab's split secret when a lab is there (a folder lab, or a PostgreSQL lab's
    artifact folder), else a throwaway one."""
    folder = resolve_lab_path(lab)
    if lab_exists(lab):
        return lab_secret(folder), f"splits drawn with the secret of the lab at {folder}"
    return secrets.token_bytes(32), "no lab found: splits drawn with a throwaway secret"


_CHECK_HELP = """Validate a task and print every problem found, in one pass; exit 2 on an error.

Checks the spec (types, scorers and their direction, budget), the harness folder and its
harness.toml, every benchmark's splits (present, non-empty, private tiers disjoint from train
and dev), and, inside the sandbox with the harness as workspace, whether any private item,
the lab's secret or a declared data source can be read from there. With `--run`, it also runs
train (if the harness trains) and predict once on the dev tier, in the sandbox.

A task.toml (every field: docs/reference/task-toml.md, made by `make docs`; `rsilab task init
NAME` writes one):

```toml
name = "mytask"
goal = "Raise accuracy."
harness = "harness"          # a folder with harness.toml, relative to this file
budget = "experiments=40,wall=20m"

[[benchmarks]]
name = "accuracy"
scorer = "accuracy"          # or "pass@5", or "scoring.py:fn" with higher_is_better
target = true
pool = "data/all.jsonl"      # or splits = { train = ..., dev = ..., accept = ..., final = ... }

[[search_space]]
name = "lr"
type = "float"
low = 0.0001
high = 1.0
log = true
default = 0.01
```
"""


@task_app.command("check", help=_CHECK_HELP)
def check(
    ref: Annotated[str, typer.Argument(metavar="PATH|NAME", help="task.toml, a .py, or a name.")],
    probe: Annotated[
        bool, typer.Option("--probe/--no-probe", help="Search for private data in the sandbox.")
    ] = True,
    probe_seconds: Annotated[
        float, typer.Option("--probe-seconds", min=1.0, help="Time bound of that search.")
    ] = 30.0,
    run: Annotated[
        bool, typer.Option("--run", help="Also run train and predict once on dev, in the sandbox.")
    ] = False,
    lab: LabOption = None,
) -> None:
    secret, note = _secret(lab)
    err = stderr_console()
    err.print(Text(f"checking {ref}; {note}", style="dim"))
    sandbox = _task_sandbox(ref) if probe or run else None
    try:
        task, problems = _check(ref, sandbox if probe else None, secret, probe_seconds)
        if task is not None:
            _print_limits(task)
        ready = task is not None and not any(p.severity == "error" for p in problems)
        if run and sandbox is not None and task is not None and ready:
            found, outcome = check_run(task, sandbox, secret)
            problems += found
            if outcome is not None:
                shown = metric_order(outcome.scores, task.benchmarks)
                scores = ", ".join(f"{k} {outcome.scores[k]:.4g}" for k in shown)
                err.print(Text(f"run: dev scores {scores} in {outcome.seconds:.2f} s"))
        elif run:
            problems.append(Problem("run", "skipped: fix the errors above first", "warning"))
    finally:
        if sandbox is not None:
            sandbox.close()
    if task is not None and task.data_sources:
        stdout_console().print(Text(_source_rule(task.data_sources)), soft_wrap=True)
    _print_problems(problems, task.name if task is not None else ref)


def _source_rule(sources: list[Path]) -> str:
    """The rule a task's declared data sources are held to, naming them."""
    shown = ", ".join(str(p) for p in sources[:3])
    more = f" and {len(sources) - 3} more" if len(sources) > 3 else ""
    return (
        f"data sources: {len(sources)} declared ({shown}{more}): every tier is cut from them, "
        "so no improver may read them: every job fails to open them, and "
        "search_local_datasets never offers a data set holding them"
    )


def _print_limits(task: Task) -> None:
    """The limits its jobs run under: an experiment's (with the task's ``[limits]``) and the
    controller's, which scale with them."""
    err = stderr_console()
    err.print(
        Text(f"limits of an experiment's jobs: {describe_limits(task.experiment_limits())}"),
        soft_wrap=True,
    )
    err.print(
        Text(f"limits of the controller's jobs: {describe_limits(task.controller_limits())}"),
        style="dim",
        soft_wrap=True,
    )


def _task_sandbox(ref: str) -> Sandbox:
    """The sandbox the task's jobs run in: its own runtime when it declares one (installed:
    RuntimeMissingError naming `rsilab runtime install --task` when it is not), with its local
    model shown read-only; a task.toml whose spec is invalid gets the base runtime (its check
    reports the faults and runs nothing)."""
    try:
        task = load_task(ref)
    except TaskLoadError:
        return _sandbox()
    shown = tuple(p for p in task.shown() if p.exists())  # a missing one: the check says so
    return _sandbox(task.own_runtime(), shown)


def _sandbox(runtime: Runtime | None = None, shown: tuple[Path, ...] = ()) -> Sandbox:
    from rsilab.sandbox.select import choose_sandbox

    choice = choose_sandbox(runtime=runtime, shown=shown)
    err = stderr_console()
    err.print(Text(f"sandbox: {choice.sandbox.name} ({choice.why})", style="dim"))
    if not choice.sandbox.is_security_boundary:
        err.print(Text("this sandbox is no security boundary: expect leaks", style="yellow"))
    return choice.sandbox


def _check(
    ref: str, sandbox: Sandbox | None, secret: bytes, probe_seconds: float
) -> tuple[Task | None, list[Problem]]:
    """A task.toml is checked in one pass even when its spec is invalid; others are loaded."""
    path = Path(ref)
    if path.suffix == ".toml" or (path.is_dir() and (path / "task.toml").is_file()):
        return check_toml(path, sandbox, secret, probe_seconds=probe_seconds)
    task = load_task(ref)
    return task, check_task(task, sandbox, secret, probe_seconds=probe_seconds)


def _print_problems(problems: list[Problem], name: str) -> None:
    out = stdout_console()
    for problem in problems:
        style = "red" if problem.severity == "error" else "yellow"
        out.print(Text(str(problem), style=style), soft_wrap=True)
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        out.print(Text(f"{len(errors)} error(s) found", style="bold red"))
        ran = all(p.where == "run" or p.where.startswith("run:") for p in errors)
        hint = (
            "hint: the run's errors come from the task's jobs: fix the harness file, setting "
            "or data the line names, then run `rsilab task check --run` again"
            if ran
            else "hint: the task.toml format, field by field: docs/reference/task-toml.md "
            "(made by `make docs`, linked from docs/tasks.md); an example: "
            "rsilab task check --help"
        )
        stderr_console().print(Text(hint, style="dim"), soft_wrap=True)
        raise typer.Exit(EXIT_PROBLEMS)
    warnings = len(problems)
    # A warning can stand for a check that did not complete (a leak search cut short): the
    # closing line must not read as a clean bill of health when one was printed above it.
    tail = f" ({warnings} warning(s) above: read them)" if warnings else ""
    out.print(Text(f"ok: task {name!r} has no errors{tail}", style="green"))


@task_app.command("init")
def init(
    name: Annotated[
        Path, typer.Argument(metavar="NAME", help="New folder; the task takes its name.")
    ],
    kind: Annotated[
        str,
        typer.Option(
            "--kind",
            help="model: a tiny model that train fits; harness: a predict-only program; "
            "lm: your language model (--model) post-trained by the posttrain harness.",
        ),
    ] = "model",
    model: Annotated[
        Path | None,
        typer.Option(
            "--model",
            metavar="PATH",
            help="With --kind lm: a Hugging Face model folder (config.json, tokenizer, "
            "*.safetensors), copied into the harness as its base model.",
        ),
    ] = None,
    model_in_place: Annotated[
        bool,
        typer.Option(
            "--model-in-place",
            help="With --model: do not copy the model; task.toml names it (`model`) and "
            "every job sees it read-only where it is. For a model too large to copy into "
            "every experiment's workspace.",
        ),
    ] = False,
) -> None:
    """Write a working task folder NAME/: task.toml, harness/, data/ and tests/.

    It passes `rsilab task check --run NAME` and runs a campaign as written
    (`rsilab run NAME/task.toml`); `python -m pytest NAME/tests` tests its harness contract.
    Refuses a folder that exists and is not empty.
    """
    if kind not in TASK_KINDS:
        raise typer.BadParameter(
            f"{kind!r} is not one of {', '.join(TASK_KINDS)}", param_hint="--kind"
        )
    written = init_task(name, kind, model, model_in_place=model_in_place)
    out = stdout_console()
    for path in written:
        out.print(Text(str(path)))
    out.print(Text(f"next: rsilab task check --run {name}", style="green"))


def _measure(task: Task) -> str:
    from rsilab.sandbox.select import default_sandbox

    try:
        runtime = task.own_runtime()
    except RuntimeMissingError as exc:
        return f"not measured: {exc.message}"
    sandbox = default_sandbox(runtime=runtime, shown=task.shown())
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
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The built-in tasks with their benchmarks and seconds per experiment.

    Without ``--measure`` the seconds shown are the figure recorded in the task (the last
    measurement by its authors, on a 2-core machine). ``--json`` prints a list of
    ``{"name", "source", "targets": [{"name", "scorer", "higher_is_better"}]}``.
    """
    if as_json:
        print_json([_summary(get_task(name)) for name in task_names()])
        return
    table = Table("task", "description", "benchmarks", "s / experiment")
    for name in task_names():
        task = get_task(name)
        benches = ", ".join(
            f"{b.name} ({b.scorer}{', target' if b.target else ''})"
            for b in shown_order(task.benchmarks)
        )
        if measure:
            seconds = _measure(task)
        else:
            recorded = task.seconds_per_experiment
            seconds = "not measured" if recorded is None else f"{recorded:.2f} (recorded)"
        table.add_row(name, task.description, benches, seconds)
    stdout_console().print(table)


def _summary(task: Task) -> dict[str, object]:
    targets = [
        {"name": b.name, "scorer": b.scorer, "higher_is_better": b.higher_is_better}
        for b in task.targets
    ]
    return {"name": task.name, "source": task.source, "targets": targets}


def register(app: typer.Typer) -> None:
    """Add the ``task`` group to ``app``."""
    app.add_typer(task_app, name="task")
