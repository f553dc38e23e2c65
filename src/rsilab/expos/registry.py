"""The tool registry: each tool is a typed function, its JSON schema comes from its signature.

A tool is written once::

    @tool(Category.EXECUTION)
    def log_metric(env: ToolEnv, experiment_id: str, name: str, value: FiniteFloat) -> dict:
        '''Record a dev-split number for an experiment.

        Args:
            experiment_id: the experiment.
            ...
        '''

The first parameter is the :class:`~rsilab.expos.context.ToolEnv`; the others become a
pydantic model (unknown fields refused) whose JSON schema is what LLMs and MCP clients see.
Parameter descriptions come from the docstring's ``Args:`` section. The same :class:`Tool`
serves Python callers, LLM tool calls and MCP.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo

from rsilab.expos.guards import PathArg


class Category(StrEnum):
    """Tool groups of the Experiment OS design."""

    DATA = "data management"
    EXECUTION = "execution and state"
    EVIDENCE = "research and evidence"
    REVIEW = "review management"
    MEMORY = "memory"
    DISCOVERY = "external discovery"
    WORKSPACE = "workspace files"
    TEAM = "research team"


@dataclass(frozen=True)
class Tool:
    """A registered tool: its function, argument model and where path arguments are."""

    name: str
    category: Category
    summary: str
    description: str
    fn: Callable[..., dict[str, Any]]
    args_model: type[BaseModel]
    path_args: tuple[tuple[str, PathArg], ...]

    def input_schema(self) -> dict[str, Any]:
        """JSON Schema of the arguments (an object; unknown properties refused)."""
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        return schema


_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters):\s*$")
_ARG_LINE = re.compile(r"^\s{4,}(\w+)(?:\s*\([^)]*\))?:\s*(.*)$")


def parse_docstring(doc: str) -> tuple[str, str, dict[str, str]]:
    """Split a Google-style docstring into (summary, description, {arg: text})."""
    lines = inspect.cleandoc(doc or "").splitlines()
    body: list[str] = []
    args: dict[str, str] = {}
    current: str | None = None
    in_args = False
    for line in lines:
        if _ARGS_HEADER.match(line):
            in_args = True
            continue
        if in_args and line and not line.startswith(" "):
            in_args = False  # another section starts
        if not in_args:
            body.append(line)
            continue
        match = _ARG_LINE.match(line)
        if match and len(line) - len(line.lstrip()) <= 4:
            current = match.group(1)
            args[current] = match.group(2).strip()
        elif current and line.strip():
            args[current] += " " + line.strip()
    description = "\n".join(body).strip()
    summary = description.split("\n\n", 1)[0].replace("\n", " ")
    return summary, description, args


def _path_marker(annotation: Any) -> PathArg | None:
    """The PathArg on a parameter's type, also inside ``X | None`` (a guard is never skipped)."""
    for meta in getattr(annotation, "__metadata__", ()):
        if isinstance(meta, PathArg):
            return meta
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        for arm in typing.get_args(annotation):
            found = _path_marker(arm)
            if found is not None:
                return found
    return None


def _build_args_model(
    fn: Callable[..., Any], arg_docs: dict[str, str]
) -> tuple[type[BaseModel], tuple[tuple[str, PathArg], ...]]:
    hints = typing.get_type_hints(fn, include_extras=True)
    params = list(inspect.signature(fn).parameters.values())[1:]  # skip the ToolEnv
    fields: dict[str, Any] = {}
    path_args: list[tuple[str, PathArg]] = []
    for param in params:
        annotation = hints[param.name]
        marker = _path_marker(annotation)
        if marker is not None:
            path_args.append((param.name, marker))
        default = ... if param.default is inspect.Parameter.empty else param.default
        if isinstance(default, FieldInfo):  # `x: T = Field(...)` carries its own constraints
            info = default
            doc = arg_docs.get(param.name)
            if info.description is None and doc is not None:
                # pydantic rebuilds the field and drops a description set on `info` afterwards;
                # carried on the annotation it survives (a description in the Field wins).
                annotation = Annotated[annotation, Field(description=doc)]
        else:
            info = Field(default=default, description=arg_docs.get(param.name))
        fields[param.name] = (annotation, info)
    model_name = "".join(p.title() for p in fn.__name__.split("_")) + "Args"
    model = create_model(model_name, __config__=ConfigDict(extra="forbid"), **fields)
    return typing.cast(type[BaseModel], model), tuple(path_args)


class ToolRegistry:
    """Tools by name; listed by category, then in registration order."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def tool(
        self, category: Category
    ) -> Callable[[Callable[..., dict[str, Any]]], Callable[..., dict[str, Any]]]:
        """Decorator that registers a function as a tool of ``category``."""

        def register(fn: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
            summary, description, arg_docs = parse_docstring(fn.__doc__ or "")
            if not summary:
                raise TypeError(f"tool {fn.__name__} needs a docstring")
            model, path_args = _build_args_model(fn, arg_docs)
            if fn.__name__ in self._tools:
                raise TypeError(f"tool {fn.__name__} registered twice")
            self._tools[fn.__name__] = Tool(
                fn.__name__, category, summary, description, fn, model, path_args
            )
            return fn

        return register

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or None."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """Every tool name, in listing order (see :meth:`all`)."""
        return [t.name for t in self.all()]

    def all(self) -> list[Tool]:
        """Every tool, grouped by category in the design's order, then by registration."""
        order = list(Category)
        return sorted(self._tools.values(), key=lambda t: order.index(t.category))
