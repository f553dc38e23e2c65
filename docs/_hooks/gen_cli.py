"""The command reference page, generated from the Typer app itself.

Every command and sub-command registered on ``rsilab.cli.app``, with its usage line, its help
text (Markdown, as ``--help`` shows it) and each argument and option as ``--help`` prints it.
:func:`commands` is also what the stale-reference check uses to know which commands exist.
"""

from __future__ import annotations

from typing import Any

import typer
from _cells import cell

from rsilab.cli import app


def _root() -> Any:
    return typer.main.get_command(app)


def commands() -> dict[str, Any]:
    """Every runnable command, by its full name (``"task check"``), in registration order."""
    found: dict[str, Any] = {}

    def walk(command: Any, prefix: tuple[str, ...]) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands is None:
            found[" ".join(prefix)] = command
            return
        for name, sub in subcommands.items():
            if not getattr(sub, "hidden", False):
                walk(sub, (*prefix, name))

    walk(_root(), ())
    return found


def groups() -> set[str]:
    """Names of the commands that hold sub-commands (``task``, ``campaign``, ``runtime``)."""
    return {name.split(" ")[0] for name in commands() if " " in name}


def option_names(name: str) -> set[str]:
    """Every option spelling of the command ``name`` (``--help`` included)."""
    command = commands()[name]
    names = {"--help"}
    for param in command.params:
        if param.param_type_name == "option":
            names.update(param.opts)
            names.update(param.secondary_opts)
    return names


def _section(name: str, command: Any) -> list[str]:
    ctx = command.context_class(command, info_name=f"rsilab {name}")
    usage = command.get_usage(ctx).strip().removeprefix("Usage: ")
    lines = ["", f"## rsilab {name}", "", "```text", usage, "```", "", command.help or "", ""]
    rows = [
        param.get_help_record(ctx)
        for param in command.params
        if not getattr(param, "hidden", False)
    ]
    rows = [row for row in rows if row is not None]
    if rows:
        lines += ["| argument or option | meaning |", "|---|---|"]
        lines += [f"| {cell(f'`{spec}`')} | {cell(text)} |" for spec, text in rows]
    return lines


def render() -> str:
    """The whole page, as Markdown."""
    found = commands()
    lines = [
        "# Command reference",
        "",
        "Generated when the site is built, from the `rsilab` Typer app: every command with its",
        "usage, its help and its options, as `rsilab COMMAND --help` prints them. The overview,",
        "with the exit codes, is in [Command line](../cli.md).",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    for name, command in found.items():
        anchor = "rsilab-" + name.replace(" ", "-")
        summary = (command.help or "").split("\n\n", 1)[0]
        lines.append(f"| [`rsilab {name}`](#{anchor}) | {cell(summary)} |")
    for name, command in found.items():
        lines += _section(name, command)
    return "\n".join(lines) + "\n"
