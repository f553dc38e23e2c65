"""Every command answers a usage error (an unknown option, a bad value, a missing argument)
with exit 2 and one ``error:`` line (and a ``hint:`` line), no traceback, no framed box.

The commands are walked from the app itself, so a command added later is checked too; the
cases are built from each command's own parameters. The expected exit code and line shapes
are literals (issue 9's table), not read from ``rsilab.cli``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command

from rsilab.cli import app
from tests.cli.helpers import explain, rsilab

BAD = "not-a-value"


def _commands(command: Any = None, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    command = command if command is not None else get_command(app)
    subs = getattr(command, "commands", None)
    if subs is None:
        yield path
        return
    for name, sub in subs.items():
        yield from _commands(sub, (*path, name))


def _command(path: tuple[str, ...]) -> Any:
    command: Any = get_command(app)
    for name in path:
        command = command.commands[name]
    return command


def _options(path: tuple[str, ...]) -> list[Any]:
    return [p for p in _command(path).params if p.param_type_name == "option"]


def _filled(path: tuple[str, ...]) -> list[str]:
    """The command and a value for each required argument, so only the fault is wrong."""
    arguments = [p for p in _command(path).params if p.param_type_name == "argument"]
    return [*path, *("x" for p in arguments if p.required)]


def _typed(option: Any) -> bool:
    """An option whose value must parse (a number or one of a set), not any text."""
    annotation = getattr(option.type_descriptor, "annotation", None)
    return annotation in (int, float) or (
        isinstance(annotation, type) and issubclass(annotation, enum.Enum)
    )


NO_TYPED_OPTION = {
    ("init",): (["--lab", "{file}"], "{file}"),  # a lab folder where a file is
    ("schema",): (["--out", "{folder}"], "{folder}"),  # a file to write where a folder is
    ("campaign", "new"): (["no-such-task"], "no-such-task"),
    ("guide",): (["cmp-000000000000", "text"], "cmp-000000000000"),
    ("rollback",): (["synthetic", "v1", "--lineage", "nowhere"], "nowhere"),
    ("task", "init"): (["{folder}/new", "--kind", BAD], BAD),
    ("lab", "migrate"): (["{file}", "postgresql://me@localhost/db?artifacts={folder}/a"], "{file}"),
    ("token", "revoke"): (["tok-nothing"], "tok-nothing"),
}
"""The bad value of a command with neither a typed option nor a flag (its arguments after
the command's name; what the error names), ``{file}`` and ``{folder}`` filled in."""


def _bad_value(path: tuple[str, ...]) -> tuple[list[str], str]:
    """Arguments with one bad value, and the option the error must name."""
    options = _options(path)
    typed = [o for o in options if _typed(o)]
    if typed:
        return [*_filled(path), typed[0].opts[0], BAD], typed[0].opts[0]
    flags = [o for o in options if o.is_flag and o.name != "help"]
    if flags:
        return [*_filled(path), f"{flags[0].opts[0]}={BAD}"], flags[0].opts[0]
    args, named = NO_TYPED_OPTION[path]
    return [*path, *args], named


COMMANDS = sorted(_commands())


def test_the_walk_finds_every_command() -> None:
    """28 commands when this was written (issue 22); fewer means the walk broke."""
    assert len(COMMANDS) >= 28, COMMANDS
    assert ("campaign", "list") in COMMANDS and ("run",) in COMMANDS


def _assert_usage_error(result: Any, *said: str) -> None:
    assert result.exit_code == 2, explain(result)
    lines = result.stderr.splitlines()
    assert 1 <= len(lines) <= 2, explain(result)  # what was wrong; what to do, when known
    assert lines[0].startswith("error: "), explain(result)
    assert all(line.startswith("hint: ") for line in lines[1:]), explain(result)
    for text in said:
        assert text in lines[0] or text in lines[1], explain(result)
    assert "Traceback" not in result.stderr + result.stdout
    assert "╭" not in result.stderr  # click's framed box is not used
    assert result.stdout == "", explain(result)


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_an_unknown_option(path: tuple[str, ...]) -> None:
    result = rsilab(*_filled(path), "--no-such-option")
    _assert_usage_error(
        result, "No such option: --no-such-option", f"rsilab {' '.join(path)} --help"
    )


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_a_bad_value(path: tuple[str, ...], tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a lab\n")
    args, named = _bad_value(path)
    argv = [a.format(file=tmp_path / "file", folder=tmp_path) for a in args]
    if "--lab" not in argv and any(o.name == "lab" for o in _options(path)):
        assert rsilab("init", "--lab", tmp_path / "lab").exit_code == 0
        argv += ["--lab", str(tmp_path / "lab")]
    _assert_usage_error(rsilab(*argv), named.format(file=tmp_path / "file", folder=tmp_path))


@pytest.mark.parametrize(
    "path",
    [
        p
        for p in COMMANDS
        if any(a.required and a.param_type_name == "argument" for a in _command(p).params)
    ],
    ids=" ".join,
)
def test_a_missing_argument(path: tuple[str, ...]) -> None:
    _assert_usage_error(rsilab(*path), "Missing")


@pytest.mark.parametrize(
    "args",
    [
        ["--no-such-option"],
        ["no-such-command"],
        ["campaign", "no-such-command"],
        ["--version=3"],
    ],
)
def test_the_root_and_a_group(args: list[str]) -> None:
    _assert_usage_error(rsilab(*args), "rsilab")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["run", "synthetic", "--seed", "-1"], "seed -1"),
        (["run", "synthetic", "--seed", str(2**30)], "at most"),
        (["run", "synthetic", "--budget", "experiments=lots"], "bad --budget"),
        (["evolve", "synthetic", "--seed", "-1"], "--seed -1"),
        (["report", "latest", "--json", "--format", "md"], "--json"),
    ],
)
def test_a_bad_value_rsilab_checks(args: list[str], said: str, tmp_path: Path) -> None:
    """Values click cannot check (a range rsilab sets, a budget's text) read the same."""
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    _assert_usage_error(rsilab(*args, "--lab", lab), said)


def test_the_console_entry_point_answers_the_same(tmp_path: Path) -> None:
    """``python -m rsilab`` (the installed script's path), not only the in-process runner."""
    import subprocess
    import sys

    argv = [sys.executable, "-m", "rsilab", "log", "--limit", BAD, "--lab", str(tmp_path)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    first, hint = done.stderr.splitlines()
    assert first.startswith("error: Invalid value for '--limit'"), done.stderr
    assert hint == "hint: see `rsilab log --help`"
