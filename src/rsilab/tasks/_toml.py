"""Loading tasks: ``task.toml`` files, Python files with ``@task`` functions, registered names.

``task.toml`` mirrors the spec at top level; paths are relative to the file's folder::

    name = "mytask"
    goal = "Raise accuracy."
    harness = "harness"
    budget = "experiments=40,wall=20m,tokens=2M"
    data_sources = ["raw/source.csv"]

    [[benchmarks]]
    name = "accuracy"
    scorer = "accuracy"
    target = true
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
"""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rsilab.errors import UserError
from rsilab.tasks._registry import get_task, task_names
from rsilab.tasks._spec import Task

TASK_FILE = "task.toml"


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
    lines = []
    for err in exc.errors():
        message = str(err["msg"]).removeprefix("Value error, ")
        lines.append(f"{where}: {_loc(tuple(err['loc']))}: {message}")
    return lines


def _resolve(data: dict[str, Any], base: Path) -> dict[str, Any]:
    def rel(value: Any) -> Any:
        return str(base / value) if isinstance(value, str) else value

    data = dict(data)
    for key in ("harness",):
        if key in data:
            data[key] = rel(data[key])
    if isinstance(data.get("data_sources"), list):
        data["data_sources"] = [rel(v) for v in data["data_sources"]]
    benchmarks = data.get("benchmarks")
    if isinstance(benchmarks, list):
        data["benchmarks"] = [_benchmark(b, rel) if isinstance(b, dict) else b for b in benchmarks]
    return data


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

    Raises:
        TaskLoadError: unreadable, not TOML, or every field problem found.
    """
    if path.is_dir():
        path = path / TASK_FILE
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except OSError as exc:
        raise TaskLoadError([f"{path}: cannot read ({exc.strerror or exc})"]) from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TaskLoadError([f"{path.name}: not valid TOML: {exc}"], "fix the syntax") from exc
    data.setdefault("source", str(path))
    try:
        return Task.model_validate(_resolve(data, path.parent))
    except ValidationError as exc:
        hint = "see `rsilab task check --help` for the task.toml format"
        raise TaskLoadError(describe_errors(exc, path.name), hint) from exc


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
