"""``init_task``: a new task folder that passes ``rsilab task check --run`` as written.

Templates are package data under ``rsilab/tasks/templates/``: one folder per kind (``model``:
a pure-Python logistic regression that trains in milliseconds, with three knobs whose
defaults underfit; ``harness``: a predict-only text normalizer scored by exact match, with
three config switches; ``lm``: a language model of the user's own, post-trained by the
built-in ``posttrain`` harness, see :mod:`rsilab.tasks._init_lm`) and ``common`` (a test of
the harness contract, for every kind). The substitutions are the task's name, ``{{name}}``
in ``task.toml`` (and the lm kind's README), and for ``lm`` its runtime's requirements.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Literal

from rsilab.errors import UserError
from rsilab.tasks._init_lm import check_model_folder, write_lm_harness
from rsilab.tasks._spec import _NAME_PATTERN

TEMPLATES = Path(__file__).parent / "templates"
"""Where the templates are: ``<kind>/`` and ``common/``."""

Kind = Literal["model", "harness", "lm"]
KINDS: tuple[Kind, ...] = ("model", "harness", "lm")


def init_task(
    folder: Path, kind: Kind = "model", model: Path | None = None, *, model_in_place: bool = False
) -> list[Path]:
    """Write the ``kind`` template into ``folder`` (made if absent); the files written.

    The task is named after the folder. ``model`` (the ``lm`` kind only, and required
    there) is a Hugging Face model folder, copied into the harness as its base model, or,
    with ``model_in_place``, named as the task's ``model`` and read where it is.

    Raises:
        UserError: ``folder`` exists and is not an empty folder, its name is not a valid
            task name, or ``model`` is missing for ``lm``, given for another kind, or not a
            usable model folder.
    """
    name = folder.resolve().name
    if not re.match(_NAME_PATTERN, name):
        raise UserError(
            f"{name!r} is not a valid task name (the task takes the folder's name): use a "
            "lower-case letter, then up to 63 of a-z, 0-9, '_', '.', '-'"
        )
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UserError(f"{folder} exists and is not empty: pick a new NAME for task init")
    if (kind == "lm") != (model is not None):
        raise UserError(
            "--model PATH goes with --kind lm, and only there"
            if model is not None
            else "the lm kind needs --model PATH: a Hugging Face model folder (config.json, "
            "tokenizer files, *.safetensors)",
        )
    if model_in_place and model is None:
        raise UserError("--model-in-place goes with --kind lm --model PATH")
    if model is not None:
        check_model_folder(model)  # before anything is written
    created = not folder.exists()
    try:
        written: list[Path] = []
        for source in (TEMPLATES / kind, TEMPLATES / "common"):
            written += _copy(source, folder)
        if model is not None:
            written += write_lm_harness(folder, model, in_place=model_in_place)
        for made in (folder / "task.toml", folder / "README.md"):
            if made.exists():
                made.write_text(made.read_text("utf-8").replace("{{name}}", name), "utf-8")
    except BaseException as exc:
        _undo(folder, created)  # a half-written task would refuse the next init of NAME
        if isinstance(exc, OSError):  # shutil.Error (copytree's) is one too
            raise UserError(
                f"task init {folder}: could not write the task: {_first_error(exc)}",
                "nothing was left behind; fix that and run task init again",
            ) from exc
        raise
    return sorted(written)


def _undo(folder: Path, created: bool) -> None:
    """Remove what init wrote: the folder when it made it, else what is in it (it was empty)."""
    if created:
        shutil.rmtree(folder, ignore_errors=True)
        return
    for child in folder.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def _first_error(exc: BaseException) -> str:
    """One line for an OSError, or for the first of the errors a copytree collected."""
    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list):
        source, _, why = exc.args[0][0]
        return f"{source}: {why}"
    return str(exc)


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
