"""``init_task``: a new task folder that passes ``rsilab task check --run`` as written.

Templates are package data under ``rsilab/tasks/templates/``: one folder per kind (``model``:
a pure-Python logistic regression that trains in milliseconds, with three knobs whose
defaults underfit; ``harness``: a predict-only text normalizer scored by exact match, with
three config switches) and ``common`` (a test of the harness contract, for every kind). The
only substitution is the task's name, ``{{name}}`` in ``task.toml``.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Literal

from rsilab.errors import UserError
from rsilab.tasks._spec import _NAME_PATTERN

TEMPLATES = Path(__file__).parent / "templates"
"""Where the templates are: ``<kind>/`` and ``common/``."""

Kind = Literal["model", "harness"]
KINDS: tuple[Kind, ...] = ("model", "harness")


def init_task(folder: Path, kind: Kind = "model") -> list[Path]:
    """Write the ``kind`` template into ``folder`` (made if absent); the files written.

    The task is named after the folder.

    Raises:
        UserError: ``folder`` exists and is not an empty folder, or its name is not a valid
            task name.
    """
    name = folder.resolve().name
    if not re.match(_NAME_PATTERN, name):
        raise UserError(
            f"{name!r} is not a valid task name (the task takes the folder's name): use a "
            "lower-case letter, then up to 63 of a-z, 0-9, '_', '.', '-'"
        )
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UserError(f"{folder} exists and is not empty: pick a new NAME for task init")
    written: list[Path] = []
    for source in (TEMPLATES / kind, TEMPLATES / "common"):
        written += _copy(source, folder)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text("utf-8").replace("{{name}}", name), "utf-8")
    return sorted(written)


def _copy(source: Path, target: Path) -> list[Path]:
    written = []
    for path in sorted(source.rglob("*")):
        if "__pycache__" in path.parts or not path.is_file():
            continue
        dest = target / path.relative_to(source)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
        written.append(dest)
    return written
