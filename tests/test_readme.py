"""The README: its Python example runs, its command table is the command line's, it stays short
and it links nothing outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer

from rsilab.cli import app

README = Path(__file__).resolve().parents[1] / "README.md"
MAX_LINES = 200


def _text() -> str:
    return README.read_text("utf-8")


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, re.M | re.S)


def _registered_commands() -> set[str]:
    """Every runnable command of the Typer app, by full name (``"task check"``)."""
    found: set[str] = set()

    def walk(command: object, prefix: tuple[str, ...]) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands is None:
            found.add(" ".join(prefix))
            return
        for name, sub in subcommands.items():
            if not getattr(sub, "hidden", False):
                walk(sub, (*prefix, name))

    walk(typer.main.get_command(app), ())
    return found


def _table_commands(text: str) -> list[str]:
    """The command of each row of the README's command table: | `rsilab NAME [SUB]` | ... |."""
    return re.findall(r"^\| `rsilab ([a-z-]+(?: [a-z-]+)?)` \|", text, re.M)


def test_the_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = _python_blocks(_text())
    assert len(blocks) == 1, "the README holds one Python example"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RSILAB_SANDBOX", "process")  # as the demo's test: the fast sandbox
    exec(compile(blocks[0], str(README), "exec"), {"__name__": "readme_example"})
    assert (tmp_path / "example-lab").is_dir()


def test_the_command_table_lists_every_command_once() -> None:
    listed = _table_commands(_text())
    assert len(listed) == len(set(listed)), "a command is listed twice"
    registered = _registered_commands()
    assert registered, "no commands found on the Typer app"
    assert set(listed) == registered, (
        f"missing from the README: {sorted(registered - set(listed))}; "
        f"not commands: {sorted(set(listed) - registered)}"
    )


def test_the_readme_is_short() -> None:
    assert len(_text().splitlines()) <= MAX_LINES


def test_the_readme_links_nothing_outside_the_repository() -> None:
    text = _text()
    assert "http://" not in text and "https://" not in text
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    outside = [t for t in targets if t.startswith(("/", "../")) or "/../" in t or "://" in t]
    assert not outside, f"links outside the repository: {outside}"
    assert "../" not in text
    root = README.parent
    missing = [t for t in targets if not (root / t.split("#", 1)[0]).exists()]
    assert not missing, f"links to files that do not exist: {missing}"


def test_the_readme_starts_with_the_two_commands() -> None:
    first_block = re.search(r"^```sh\n(.*?)^```$", _text(), re.M | re.S)
    assert first_block is not None and _text().index("```sh") < _text().index("\n## ")
    commands = [line.split("#", 1)[0].strip() for line in first_block.group(1).splitlines()]
    assert commands == ["make demo", "make test"]


def _own_task_lines(text: str) -> list[list[str]]:
    """The commands of the README's "Your own task" block, each split into arguments."""
    block = re.search(r"^Your own task.*?^```sh\n(.*?)^```$", text, re.M | re.S)
    assert block is not None, "the README shows how to make and run your own task"
    lines = [line.split("#")[0].split() for line in block.group(1).splitlines()]
    return [line for line in lines if line]


def test_your_own_task_runs_as_the_readme_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a folder with no lab yet, the three lines make a task, check it and run a campaign."""
    from tests.cli.helpers import explain, rsilab

    lines = _own_task_lines(_text())
    assert [line[:3] for line in lines] == [
        ["rsilab", "task", "init"],
        ["rsilab", "task", "check"],
        ["rsilab", "run", "demo/task.toml"],
    ]
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RSILAB_LAB", raising=False)
    for line in lines:
        result = rsilab(*line[1:])
        assert result.exit_code == 0, (line, explain(result))
    assert (tmp_path / ".rsilab" / "lab.db").is_file()
    assert "experiment 6/6" in result.stderr + result.stdout
