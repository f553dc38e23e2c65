"""Scorers a ``task.toml`` names from a Python file in its own folder: ``"scoring.py:fn"``.

The file is imported on the host, by whoever loads the task (the controller, ``task check``),
never inside a sandbox: it is the task author's code, trusted like a Python task file, and
kept where the improver cannot edit it. ``fn(sample, output)`` returns a float or a
:class:`Scored`; anything else, or a raise, scores the sample invalid (``score_outputs``).
The function is registered under its file's absolute path and its name
(``/abs/task/scoring.py:fn``), so two tasks' ``fn`` never clash, and loading the task again
registers the file's current function under the same name.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import re
import sys
from pathlib import Path

from pydantic import JsonValue

from rsilab.tasks._samples import Sample
from rsilab.tasks._scorers import Scored, ScoreFn, register_scorer

_REF = re.compile(r"^(?P<file>[^:]+\.py):(?P<fn>[A-Za-z_][A-Za-z0-9_]*)$")


def is_file_scorer(ref: str) -> bool:
    """True when ``ref`` has the form ``FILE.py:FUNCTION``."""
    return _REF.match(ref) is not None


def load_file_scorer(ref: str, base: Path, *, higher_is_better: bool) -> str:
    """Register the function ``ref`` (``FILE.py:FN``, FILE relative to ``base``); its name.

    Raises:
        ValueError: a malformed reference, a file outside ``base`` or missing, an import that
            fails, or no function of that name (the message says which).
    """
    match = _REF.match(ref)
    if match is None:
        raise ValueError(f"{ref!r} is not FILE.py:FUNCTION")
    folder = base.resolve()
    path = (folder / match["file"]).resolve()
    if not path.is_relative_to(folder):
        raise ValueError(f"scorer file {match['file']} is outside the task folder {folder}")
    if not path.is_file():
        raise ValueError(f"scorer file {match['file']} not found in {folder}")
    module = _import(path)
    fn = getattr(module, match["fn"], None)
    if not callable(fn):
        raise ValueError(f"{match['file']} defines no function {match['fn']!r}")
    name = f"{path}:{match['fn']}"
    register_scorer(
        name,
        higher_is_better=higher_is_better,
        invalid_score=0.0 if higher_is_better else math.inf,
        description=f"{match['fn']} from {path.name}",
        replace=True,
        source_sha256=source_sha256(path, module, folder),
    )(_wrap(fn))
    return name


def source_sha256(path: Path, module: object, folder: Path) -> str:
    """sha256 over the scorer file's bytes and those of every module of the task ``folder`` it
    imported (by name, in path order): what its scores depend on beyond the standard library
    and installed packages, so that editing any of it changes the evaluator's hash."""
    files = {path}
    for value in vars(module).values():
        found = getattr(value, "__file__", None) or getattr(
            sys.modules.get(getattr(value, "__module__", "") or ""), "__file__", None
        )
        if found and Path(found).resolve().is_relative_to(folder):
            files.add(Path(found).resolve())
    digest = hashlib.sha256()
    for file in sorted(files):
        digest.update(str(file.relative_to(folder)).encode() + b"\0")
        digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()


def _import(path: Path) -> object:
    module_name = "rsilab_task_scorer_" + hashlib.sha256(str(path).encode()).hexdigest()[:16]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"{path.name} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the author's file: any failure is one line for them
        raise ValueError(f"{path.name}: import failed: {type(exc).__name__}: {exc}") from exc
    sys.modules[module_name] = module
    return module


def _wrap(fn: object) -> ScoreFn:
    def score(sample: Sample, output: JsonValue) -> Scored:
        value = fn(sample, output)  # type: ignore[operator]
        if isinstance(value, Scored):
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"returned {type(value).__name__}, not a float or Scored")
        if not math.isfinite(value):
            raise ValueError(f"returned {value}, not a finite number")
        return Scored(sample.id, float(value))

    return score
