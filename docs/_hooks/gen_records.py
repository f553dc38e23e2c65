"""The record reference page, generated from the record models of ``rsilab.records``.

Every record kind the store keeps (``RECORD_TYPES``), with its docstring and each field's
type and description; the fields every record has are listed once.
"""

from __future__ import annotations

import inspect
import re
from enum import Enum
from typing import Any

from _cells import cell
from pydantic import BaseModel

from rsilab.records import RECORD_TYPES, SCHEMA_VERSION, Record


def type_of(annotation: Any) -> str:
    """A short Python spelling of a field's type."""
    if inspect.isclass(annotation) and issubclass(annotation, Enum):
        return "one of " + ", ".join(f"`{m.value}`" for m in annotation)
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel | str | int | float):
        return f"`{annotation.__name__}`"
    text = str(annotation)
    text = re.sub(r"<class '([\w.]+)'>", r"\1", text)
    text = re.sub(r"\b(?:[a-z_]\w*\.)+([A-Z]\w*)", r"\1", text).replace("typing.", "")
    return f"`{text}`"


def _fields(model: type[BaseModel], skip: set[str]) -> list[str]:
    lines = ["| field | type | description |", "|---|---|---|"]
    for name, info in model.model_fields.items():
        if name in skip or info.exclude:
            continue
        lines.append(
            f"| `{name}` | {cell(type_of(info.annotation))} | {cell(info.description or '')} |"
        )
    return lines


def render() -> str:
    """The whole page, as Markdown."""
    common = set(Record.model_fields)
    lines = [
        "# Record reference",
        "",
        "Generated when the site is built, from the pydantic models of `rsilab.records`",
        f"(schema version {SCHEMA_VERSION}). `rsilab schema` prints the same as JSON Schema.",
        "Records are stored as canonical JSON; the ledger carries the sha256 of each record's",
        "text. See [Concepts](../concepts.md#records) for their contracts.",
        "",
        "## Every record",
        "",
        inspect.cleandoc(Record.__doc__ or "").split("\n\n", 1)[0],
        "",
        *_fields(Record, set()),
        "",
        "| kind | record | what it is |",
        "|---|---|---|",
    ]
    for kind, model in RECORD_TYPES.items():
        summary = inspect.cleandoc(model.__doc__ or "").split("\n\n", 1)[0]
        lines.append(f"| [`{kind}`](#{kind}) | `{model.__name__}` | {cell(summary)} |")
    for kind, model in RECORD_TYPES.items():
        lines += [
            "",
            f"## {kind}",
            "",
            f"`{model.__name__}`, id prefix `{model.PREFIX}-`. "
            + inspect.cleandoc(model.__doc__ or ""),
            "",
            *_fields(model, common),
        ]
    return "\n".join(lines) + "\n"
