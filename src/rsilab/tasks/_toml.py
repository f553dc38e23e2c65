"""Loading tasks: ``task.toml`` files, Python files with ``@task`` functions, registered names.

``task.toml`` mirrors the spec at top level; paths are relative to the file's folder::

    name = "mytask"
    goal = "Raise accuracy."
    harness = "harness"
    budget = "experiments=40,wall=20m,tokens=2M"
    data_sources = ["raw/source.csv"]

    [[benchmarks]]
    name = "accuracy"
    scorer = "accuracy"        # or "pass@5", or "scoring.py:my_score" (a file in this folder)
    target = true
    # higher_is_better: omitted, the scorer's direction; required for a scorer from a file
    splits = { train = "data/train.jsonl", dev = "data/dev.jsonl",
               accept = "data/accept.jsonl", final = "data/final.jsonl" }
    # or: pool = "data/all.jsonl" and optionally fractions = { train = 0.5, ... }

    [[search_space]]
    name = "lr"
    type = "float"
    low = 1e-4
    high = 1.0
    log = true
    default = 0.01

Every problem is reported at once, as ``task.toml: benchmarks.0.scorer: unknown scorer ...``.
A scorer named ``FILE.py:FUNCTION`` is imported from the task's folder on the host and
registered under the file's absolute path (see ``rsilab.tasks._scorer_files``).
"""

from __future__ import annotations

import difflib
import importlib.util
import sys
import tomllib
import typing
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rsilab.errors import UserError
from rsilab.tasks._registry import get_task, task_names
from rsilab.tasks._salvage import consistency_problem
from rsilab.tasks._scorer_files import is_file_scorer, load_file_scorer
from rsilab.tasks._spec import Task

TASK_FILE = "task.toml"
FORMAT_HINT = (
    "the task.toml format, field by field: docs/reference/task-toml.md (made by `make "
    "docs`, linked from docs/tasks.md); an example: `rsilab task check --help`"
)


class TaskLoadError(UserError):
    """A task could not be loaded; ``problems`` lists every fault, each naming its field."""

    def __init__(self, problems: list[str], hint: str = "") -> None:
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"{len(problems)} problem(s) in the task:\n{lines}", hint)
        self.problems = problems


_TOML_NAMES = (
    ("samples.files.files", "splits"),
    ("samples.pool.pool", "pool"),
    ("samples.pool.fractions", "fractions"),
    ("samples.files", "splits"),
    ("samples.pool", "pool"),
)
"""Spec paths as they are spelled in task.toml."""


def _loc(loc: tuple[int | str, ...]) -> str:
    dotted = ".".join(str(p) for p in loc)
    for spec_name, toml_name in _TOML_NAMES:
        dotted = dotted.replace(spec_name, toml_name)
    return dotted or "(top level)"


def describe_errors(exc: ValidationError, where: str) -> list[str]:
    """One line per pydantic error: ``WHERE: dotted.field: message``."""
    return [line for err in exc.errors() for line in describe_errors_one(err, where)]


def describe_errors_one(err: Any, where: str) -> list[str]:
    """The line of one pydantic error (``ErrorDetails``): ``WHERE: dotted.field: message``; an
    unknown key names the nearest known one (``tolerence``: did you mean ``tolerance``?)."""
    message = str(err["msg"]).removeprefix("Value error, ")
    loc = tuple(err["loc"])
    if err.get("type") == "extra_forbidden" and loc and isinstance(loc[-1], str):
        near = difflib.get_close_matches(loc[-1], _fields_at(loc[:-1]), n=1, cutoff=0.6)
        if near:
            message += f"; did you mean {near[0]!r}?"
    return [f"{where}: {_loc(loc)}: {message}"]


def _fields_at(loc: tuple[Any, ...]) -> list[str]:
    """The field names of the model a task.toml location leads to (none when it cannot be
    followed): ``("benchmarks", 0)`` leads to a benchmark's fields."""
    from rsilab.tasks._spec import Task

    model: Any = Task
    for part in loc:
        if isinstance(part, int):
            continue
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return []
        model = _model_in(field.annotation)
        if model is None:
            return []
    fields = getattr(model, "model_fields", {})
    return [*fields, *(f.alias for f in fields.values() if f.alias)]


def _model_in(annotation: Any) -> Any:
    """The pydantic model an annotation holds (``list[Benchmark]``, ``Knob | None``), or None
    (a union of several models is not followed)."""
    if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
        return annotation
    found = [m for arg in typing.get_args(annotation) if (m := _model_in(arg)) is not None]
    return found[0] if len(found) == 1 else None


def _resolve(data: dict[str, Any], base: Path) -> dict[str, Any]:
    def rel(value: Any) -> Any:
        return str(base / value) if isinstance(value, str) else value

    data = dict(data)
    for key in ("harness", "model"):
        if key in data:
            data[key] = rel(data[key])
    if isinstance(data.get("data_sources"), list):
        data["data_sources"] = [rel(v) for v in data["data_sources"]]
    benchmarks = data.get("benchmarks")
    if isinstance(benchmarks, list):
        data["benchmarks"] = [_benchmark(b, rel) if isinstance(b, dict) else b for b in benchmarks]
    return data


def _file_scorers(data: dict[str, Any], base: Path, where: str) -> tuple[list[str], set[int]]:
    """Register every ``FILE.py:FN`` scorer in ``data`` (rewriting it to its registered name).

    Returns the problems and the indexes of the benchmarks whose scorer could not be loaded
    (their "unknown scorer" error from the spec would only repeat the problem).
    """
    problems: list[str] = []
    failed: set[int] = set()
    benchmarks = data.get("benchmarks")
    for i, table in enumerate(benchmarks if isinstance(benchmarks, list) else []):
        ref = table.get("scorer") if isinstance(table, dict) else None
        if not isinstance(ref, str) or not is_file_scorer(ref):
            continue
        higher = table.get("higher_is_better")
        try:
            if not isinstance(higher, bool):
                raise ValueError(
                    "a scorer from a file needs higher_is_better = true or false (its direction)"
                )
            table["scorer"] = load_file_scorer(ref, base, higher_is_better=higher)
        except ValueError as exc:
            problems.append(f"{where}: benchmarks.{i}.scorer: {exc}")
            failed.add(i)
    return problems, failed


def read_toml(path: Path) -> tuple[Path, dict[str, Any], list[str], set[int]]:
    """The file (``path`` or its ``task.toml``), its data with paths resolved and scorer files
    registered, the problems found on the way, and the benchmarks whose scorer failed to load.

    Raises:
        TaskLoadError: unreadable or not TOML (nothing more can be checked).
    """
    # Absolute from here on, so every path in the task and its recorded source name the same
    # files wherever the process runs later (a resume from another folder, say).
    path = Path(path).absolute()
    if path.is_dir():
        path = path / TASK_FILE
    try:
        data = tomllib.loads(path.read_text("utf-8-sig"))  # a byte-order mark as editors show it
    except OSError as exc:
        raise TaskLoadError([f"{path}: cannot read ({exc.strerror or exc})"]) from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TaskLoadError([f"{path.name}: not valid TOML: {exc}"], "fix the syntax") from exc
    data.setdefault("source", str(path.resolve()))
    resolved = _resolve(data, path.parent)
    problems, failed = _file_scorers(resolved, path.parent, path.name)
    return path, resolved, problems, failed


def validate_toml(
    path: Path, data: dict[str, Any], problems: list[str], failed: set[int]
) -> Task | None:
    """The task in ``data`` (from :func:`read_toml`), appending every spec problem to
    ``problems``; None when there is any."""
    try:
        task = Task.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            loc = tuple(err["loc"])
            if len(loc) == 3 and loc[0] == "benchmarks" and loc[1] in failed and loc[2] == "scorer":
                continue  # already reported, with the reason the file did not load
            problems.extend(describe_errors_one(err, path.name))
        if all(err["loc"] for err in exc.errors()):  # field errors hide the task-level checks
            fault = consistency_problem(data)
            if fault is not None:
                problems.append(f"{path.name}: (top level): {fault}")
        return None
    return None if problems else task


def _benchmark(table: dict[str, Any], rel: Any) -> dict[str, Any]:
    table = dict(table)
    if "samples" in table:
        return table
    if "splits" in table:
        splits = table.pop("splits")
        files = {k: rel(v) for k, v in splits.items()} if isinstance(splits, dict) else splits
        table["samples"] = {"kind": "files", "files": files}
    elif "pool" in table:
        pool: dict[str, Any] = {"kind": "pool", "pool": rel(table.pop("pool"))}
        if "fractions" in table:
            pool["fractions"] = table.pop("fractions")
        table["samples"] = pool
    else:
        table["samples"] = {"kind": "files", "files": {}}
    return table


def load_toml(path: Path) -> Task:
    """The task in a ``task.toml`` file (or a folder holding one).

    ``source`` defaults to the file's absolute path, so the task can be loaded again from its
    records wherever the process runs.

    Raises:
        TaskLoadError: unreadable, not TOML, or every field problem found.
    """
    path, data, problems, failed = read_toml(path)
    task = validate_toml(path, data, problems, failed)
    if task is None:
        raise TaskLoadError(problems, FORMAT_HINT)
    return task


def load_python(path: Path, name: str | None = None) -> Task:
    """The ``@task`` in a Python file (the one named ``name`` when it has several).

    Raises:
        TaskLoadError: the file fails to import, holds no task, or several without a name.
    """
    before = set(task_names())
    module_name = f"rsilab_user_task_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise TaskLoadError([f"{path}: not a Python file"])
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise TaskLoadError([f"{path}: import failed: {type(exc).__name__}: {exc}"]) from exc
    found = sorted(n for n in set(task_names()) - before) or sorted(
        n for n, fn in vars(module).items() if n in task_names() and callable(fn)
    )
    if name is None and len(found) != 1:
        raise TaskLoadError(
            [f"{path}: defines {len(found)} @task functions: {found}"], "use PATH:NAME"
        )
    return _build(name or found[0], f"{path}")


def _build(name: str, where: str) -> Task:
    try:
        built = get_task(name)
    except KeyError as exc:
        raise TaskLoadError([str(exc.args[0])]) from exc
    except ValidationError as exc:
        raise TaskLoadError(describe_errors(exc, where)) from exc
    return built if built.source == "builtin" else built.model_copy(update={"source": where})


def load_task(ref: str | Path) -> Task:
    """A task by registered name, ``task.toml`` path or folder, or ``file.py[:NAME]``.

    Raises:
        TaskLoadError: nothing found under ``ref``, or the task there is invalid.
    """
    text = str(ref)
    file_part, _, name = text.rpartition(":") if ".py:" in text else (text, "", "")
    path = Path(file_part)
    if path.suffix == ".py" and path.is_file():
        return load_python(path, name or None)
    if path.suffix == ".toml" or (path.is_dir() and (path / TASK_FILE).is_file()):
        return load_toml(path)
    if text in task_names():
        return _build(text, text)
    raise TaskLoadError(
        [f"{text!r} is neither a task name, a task.toml, nor a .py file with a @task"],
        f"known task names: {', '.join(task_names())}",
    )
