"""The ``task.toml`` and ``harness.toml`` reference page, generated from the pydantic models.

Fields, types, defaults and descriptions come from :class:`rsilab.tasks.Task` and the models
it holds, how the file spells the sample sources from the loader's own table
(``rsilab.tasks._toml._TOML_NAMES``), the example from the loader's docstring, and the scorers
from their registry. A field added to the spec appears here at the next build.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from enum import Enum
from pathlib import Path
from typing import Any

from _cells import cell
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from rsilab.tasks import (
    LIMIT_CEILINGS,
    Benchmark,
    Budget,
    FileSplits,
    Knob,
    KnobCondition,
    Manifest,
    PoolSplits,
    Task,
    TaskLimits,
    Trap,
    ensure_builtins,
    get_scorer,
    scorer_families,
    scorer_names,
)
from rsilab.tasks import _toml as toml_loader

_SECTIONS: dict[Any, str] = {Benchmark: "benchmarks", Knob: "search_space", Trap: "traps"}
"""Models that are arrays of tables in task.toml, and the section of this page on each."""
_SAMPLE_KINDS: dict[str, type[BaseModel]] = {"files": FileSplits, "pool": PoolSplits}


def type_of(annotation: Any) -> str:
    """A short type, in TOML's words, for a field's annotation."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        arms = [a for a in args if a is not type(None)]
        text = " or ".join(type_of(a) for a in arms)
        return text + " (optional)" if len(arms) < len(args) else text
    if origin is typing.Literal:
        return "one of " + ", ".join(f'`"{value}"`' for value in args)
    if origin is list and args[0] in _SECTIONS:
        return f"array of tables, see [{_SECTIONS[args[0]]}](#{_SECTIONS[args[0]]})"
    if origin is list:
        return "array of " + type_of(args[0])
    if origin is dict and inspect.isclass(args[0]) and issubclass(args[0], Enum):
        keys = ", ".join(f"`{member.value}`" for member in args[0])
        return f"table with keys {keys}, each a {type_of(args[1])}"
    if inspect.isclass(annotation) and issubclass(annotation, Enum):
        return "one of " + ", ".join(f'`"{m.value}"`' for m in annotation)
    if annotation is Budget:
        return "string or table, see [budget](#budget)"
    if annotation is TaskLimits:
        return "table, see [limits](#limits)"
    if annotation is KnobCondition:
        keys = ", ".join(f"`{name}`" for name in KnobCondition.model_fields)
        return f"inline table with keys {keys} (`knob` and one of the other two)"
    names = {str: "string", bool: "boolean", int: "integer", float: "number"}
    if annotation in names:
        return names[annotation]
    if annotation is Path:
        return "path (relative to the file's folder)"
    if "JsonValue" in str(annotation):
        return "any value"
    return f"`{getattr(annotation, '__name__', annotation)}`"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Enum):
        return f'"{value.value}"'
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, dict):
        inner = ", ".join(
            f"{_toml_value(k).strip(chr(34))} = {_toml_value(v)}" for k, v in value.items()
        )
        return "{ " + inner + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        made = info.default_factory()  # type: ignore[call-arg]
        return f'`"{made}"`' if isinstance(made, Budget) else f"`{_toml_value(made)}`"
    if info.default is PydanticUndefined:
        return "required"
    if info.default is None:
        return "none"
    return f"`{_toml_value(info.default)}`"


def _constraints(info: FieldInfo) -> str:
    found = []
    for meta in info.metadata:
        for key in ("pattern", "ge", "gt", "le", "lt", "min_length", "max_length"):
            value = getattr(meta, key, None)
            if value is not None:
                found.append(f"{key} `{value}`")
    return f" ({', '.join(found)})" if found else ""


def _rows(fields: list[tuple[str, FieldInfo]]) -> list[str]:
    lines = ["| key | type | default | description |", "|---|---|---|---|"]
    for name, info in fields:
        lines.append(
            f"| `{name}` | {cell(type_of(info.annotation) + _constraints(info))} "
            f"| {_default(info)} | {cell(info.description or '')} |"
        )
    return lines


def _own_fields(model: type[BaseModel]) -> list[tuple[str, FieldInfo]]:
    return [(n, f) for n, f in model.model_fields.items() if not f.exclude]


def _sample_keys() -> list[tuple[str, FieldInfo]]:
    """The keys by which task.toml names a benchmark's samples, from the loader's table."""
    keys = []
    for spec_path, toml_name in toml_loader._TOML_NAMES:
        parts = spec_path.split(".")
        if len(parts) != 3 or parts[0] != "samples":
            continue
        model = _SAMPLE_KINDS[parts[1]]  # a KeyError here: the loader changed; update this page
        keys.append((toml_name, model.model_fields[parts[2]]))
    if not keys or "samples" not in Benchmark.model_fields:
        raise RuntimeError("task.toml reference: the loader's sample keys changed; update the hook")
    return keys


def _example() -> str:
    doc = inspect.getdoc(toml_loader) or ""
    match = re.search(r"::\n\n((?:    .*\n|\n)+)", doc + "\n")
    if match is None:
        raise RuntimeError("task.toml reference: no example in rsilab.tasks._toml's docstring")
    return inspect.cleandoc(match.group(1))


def _scorers() -> list[str]:
    ensure_builtins()
    lines = ["| scorer | better | invalid output scores | what it scores |", "|---|---|---|---|"]
    for name in scorer_names():
        info = get_scorer(name)
        better = "higher" if info.higher_is_better else "lower"
        lines.append(
            f"| `{name}` | {better} | `{info.invalid_score:g}` | {cell(info.description)} |"
        )
    for family in scorer_families():
        better = "higher" if family.higher_is_better else "lower"
        lines.append(
            f"| `{family.pattern}` | {better} | `{family.invalid_score:g}` "
            f"| {cell(family.description)} |"
        )
    return lines


def render() -> str:
    """The whole page, as Markdown."""
    benchmark_fields = [(n, f) for n, f in _own_fields(Benchmark) if n != "samples"]
    return "\n".join(
        [
            "# task.toml reference",
            "",
            "Generated when the site is built, from the task spec's pydantic models",
            "(`rsilab.tasks.Task` and the models it holds) and the `task.toml` loader",
            "(`rsilab.tasks.load_toml`). [Tasks](../tasks.md) explains how to write one;",
            "`rsilab task check PATH` lists every problem of a file at once.",
            "",
            "A `task.toml` mirrors the spec at top level. Paths are relative to the folder that",
            "holds the file. This example is the loader's own:",
            "",
            "```toml",
            _example(),
            "```",
            "",
            "## Top level",
            "",
            *_rows(_own_fields(Task)),
            "",
            "## budget",
            "",
            'Either a string such as `budget = "experiments=40,wall=20m,tokens=2M"` (any subset,',
            "any order; `wall` takes `90s`, `20m` or `1.5h`, counts take `500k` or `2M`) or a",
            'table with these keys (`wall = "20m"` may stand for `wall_s`):',
            "",
            *_rows(_own_fields(Budget)),
            "",
            "## limits",
            "",
            "A `[limits]` table: the limits of an experiment's jobs, each key left out keeping",
            "its default; the controller's jobs scale with them, never below an experiment's",
            "(see [Tasks](../tasks.md#what-a-job-may-use)). A value must be positive and at",
            "most the lab's ceiling: "
            + ", ".join(f"`{k}` {v:,.0f}" for k, v in LIMIT_CEILINGS.items())
            + ".",
            "",
            *_rows(_own_fields(TaskLimits)),
            "",
            "## benchmarks",
            "",
            "One `[[benchmarks]]` table per benchmark; at least one has `target = true`.",
            "",
            *_rows(benchmark_fields),
            "",
            "Its samples come from `splits` (a file per tier) or from `pool` (one file, split",
            "by the lab's secret in the given `fractions`); each sample is a JSON line",
            '`{"id", "input", "target"}`. "required" below means required for that way.',
            "",
            *_rows(_sample_keys()),
            "",
            "## search_space",
            "",
            "One `[[search_space]]` table per knob of the harness's config file; the built-in",
            "policy searches these.",
            "",
            *_rows(_own_fields(Knob)),
            "",
            "## traps",
            "",
            "Bait for the hacking suite (optional).",
            "",
            *_rows(_own_fields(Trap)),
            "",
            "## Scorers",
            "",
            "The names `scorer` accepts (the built-in tasks register some of their own). Every",
            "scorer scores one sample; a benchmark's score is the mean over its samples, which",
            "is what the controller's statistics assume. A name ending in `K` takes a whole",
            "number there: `pass@5`. `better` is the scorer's direction: leave",
            "`higher_is_better` out and the benchmark takes it; give it and it must agree, or",
            "the file is refused.",
            "",
            *_scorers(),
            "",
            "### A scorer of your own",
            "",
            "A benchmark may name a function in a Python file of the task's folder:",
            '`scorer = "scoring.py:my_score"`. `higher_is_better` is then required (it is',
            "that scorer's direction). The file is imported on the host by whatever loads the",
            "task (the controller, `rsilab task check`), never inside a sandbox, and a path",
            "outside the task's folder is refused. `my_score(sample, output)` gets the sample",
            "(`sample.id`, `sample.input`, `sample.target`) and the harness's output for it, and",
            "returns a float or a `rsilab.tasks.Scored`; anything else, or a raise, scores the",
            "sample invalid (0 when higher is better, infinity when lower is). It is registered",
            "under the file's absolute path and the function's name, so two tasks' `my_score`",
            "never clash.",
            "",
            "```python",
            "def my_score(sample, output):",
            "    return 1.0 if str(output).strip().lower() == str(sample.target).lower() else 0.0",
            "```",
            "",
            "## harness.toml",
            "",
            "The folder `harness` names holds a `harness.toml` with one `[harness]` table",
            "(commands are split like a shell would split them):",
            "",
            *_rows(_own_fields(Manifest)),
            "",
        ]
    )
