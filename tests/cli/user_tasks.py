"""Tasks a user writes themselves, made the way a user makes them: ``rsilab task init``, then
edits to the files it wrote."""

from __future__ import annotations

from pathlib import Path

from tests.cli.helpers import explain, rsilab


def harness_task(root: Path, name: str = "mine") -> Path:
    """A new predict-only task folder ``root/name`` (``task init --kind harness``): lines of
    text normalised as three switches of ``config.json`` say; its score does not depend on
    the seed."""
    made = rsilab("task", "init", root / name, "--kind", "harness")
    assert made.exit_code == 0, explain(made)
    return root / name


def edit(path: Path, old: str, new: str) -> None:
    """Replace the one ``old`` in the file ``path`` with ``new``."""
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} is not in {path} once"
    path.write_text(text.replace(old, new))


def target_declared_second(folder: Path) -> None:
    """Make the task's target ``zeta``, declared after a non-target ``alpha`` (whose name
    sorts first), both exact match on the same pool."""
    edit(
        folder / "task.toml",
        '[[benchmarks]]\nname = "exact"',
        '[[benchmarks]]\nname = "alpha"\nscorer = "exact_match"\ntolerance = 1.0\n'
        'pool = "data/lines.jsonl"\n\n[[benchmarks]]\nname = "zeta"',
    )
