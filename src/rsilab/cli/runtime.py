"""``rsilab runtime install|adopt|show``: the venv harnesses run in (see rsilab.sandbox.runtime
and rsilab.sandbox.runtime_adopt)."""

from __future__ import annotations

import functools
from pathlib import Path
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
from rsilab.errors import UserError
from rsilab.sandbox.runtime import (
    Runtime,
    full_requirements_text,
    install_command,
    install_runtime,
    requirement_lines,
    task_runtime,
)
from rsilab.sandbox.runtime_adopt import adopt_runtime
from rsilab.sandbox.runtime_built import built_files, copy_built
from rsilab.tasks import load_task

TaskOption = Annotated[
    str | None,
    typer.Option(
        "--task",
        help="A task (name, task.toml or its folder, or file.py:NAME) whose declared runtime "
        "requirements get a runtime of their own.",
    ),
]


def _runtime(task: str | None) -> Runtime:
    """The runtime of ``task`` (the base one without a task); TaskLoadError (a UserError)
    when it cannot be loaded."""
    if task is None:
        return task_runtime(())
    spec = load_task(task)
    return spec.runtime()


runtime_app = typer.Typer(
    help="The runtime environment sandboxed jobs run in.",
    no_args_is_help=True,
    rich_markup_mode=MARKUP,
)


@runtime_app.command("install")
def install(
    force: Annotated[bool, typer.Option("--force", help="Delete and rebuild it.")] = False,
    task: TaskOption = None,
    built_from: Annotated[
        Path | None,
        typer.Option(
            "--built-from",
            metavar="STAMP",
            help="With --task: copy the files another install of this runtime built (its "
            ".rsilab-runtime.json, copied with those files beside it), checked by sha256, "
            "instead of running the build step (a Ray node: the head's base model bytes).",
        ),
    ] = None,
    lab: UnusedLabOption = None,
) -> None:
    """Create the runtime venv and install the harness libraries (quick if already done).

    torch comes first, pinned to the CPU build; then the rest of the requirements file, and
    with --task the task's own pinned lines, into a venv keyed by all of them; then the
    task's build step, or with --built-from a checked copy of what another install built.
    """
    console = stderr_console()
    spec = load_task(task) if task is not None else None
    build = spec.runtime_build if spec is not None else None
    if built_from is not None:
        if spec is None or build is None:
            raise UserError(
                "--built-from needs --task naming a task with a build step",
                "e.g. rsilab runtime install --task posttrain --built-from STAMP",
            )
        key = spec.runtime().key
        build = functools.partial(
            copy_built, built_from.absolute(), key, build_id=spec.runtime_build_id
        )
    runtime = install_runtime(
        extra=spec.runtime_requirements if spec is not None else (),
        build=build,
        build_id=spec.runtime_build_id if spec is not None else "",
        force=force,
        log=lambda line: console.print(Text(line)),
    )
    typer.echo(str(runtime.path))


@runtime_app.command("adopt")
def adopt(
    python: Annotated[
        Path,
        typer.Argument(metavar="PYTHON", help="The interpreter to use, e.g. /usr/bin/python3."),
    ],
    force: Annotated[
        bool, typer.Option("--force", help="Replace a runtime already at its path.")
    ] = False,
    task: TaskOption = None,
    lab: UnusedLabOption = None,
) -> None:
    """Use an existing interpreter (a GPU machine's, with its CUDA torch) as the runtime.

    It must import every requirement of the runtime (with --task, the task's too): torch at
    any 2.x build, CUDA allowed; every other package as its requirement line says; the same
    Python major.minor as rsilab's. Its packages are linked into the runtime's folder, which
    the sandbox then uses; a task's build step (a base model) runs with that interpreter.
    Nothing is downloaded. Refuses in one line naming what is missing.
    """
    console = stderr_console()
    spec = load_task(task) if task is not None else None
    runtime = adopt_runtime(
        python,
        extra=spec.runtime_requirements if spec is not None else (),
        build=spec.runtime_build if spec is not None else None,
        build_id=spec.runtime_build_id if spec is not None else "",
        force=force,
        log=lambda line: console.print(Text(line)),
    )
    typer.echo(str(runtime.path))


@runtime_app.command("show")
def show(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    task: TaskOption = None,
    lab: UnusedLabOption = None,
) -> None:
    """Print where the runtime lives, whether it is installed, and what it holds."""
    runtime = _runtime(task)
    installed = runtime.is_installed()
    packages = runtime.packages() if installed else []
    lines = requirement_lines(full_requirements_text(runtime.extra))
    command = install_command(task)
    built = {f.name: {"path": str(f.path), "sha256": f.sha256} for f in built_files(runtime)}
    adopted = str((runtime.stamp() or {}).get("adopted") or "") if installed else ""
    built_by = (runtime.stamp() or {}).get("build_id")
    stale = runtime.other_build()
    if as_json:
        print_json(
            {
                "path": str(runtime.path),
                "installed": installed,
                "adopted": adopted or None,
                "requirements": lines,
                "built": built,
                "build_id": runtime.build_id,
                "built_by": built_by,
                "packages": dict(packages),
            }
        )
        return
    console = stdout_console()
    console.print(Text(f"path: {runtime.path}"))
    why = f"its base was built by {stale!r}, not {runtime.build_id!r}; " if stale else ""
    console.print(Text(f"installed: {'yes' if installed else f'no ({why}run `{command}`)'}"))
    if adopted:
        console.print(Text(f"adopted from: {adopted}"))
    console.print(Text(f"requirements: {', '.join(lines)}"))
    for name, facts in built.items():
        console.print(Text(f"built: {name} at {facts['path']} (sha256 {facts['sha256']})"))
    if packages:
        table = Table("package", "version")
        for name, version in packages:
            table.add_row(Text(name), Text(version))
        console.print(table)


def register(app: typer.Typer) -> None:
    """Add the ``runtime`` group to ``app``."""
    app.add_typer(runtime_app, name="runtime")
