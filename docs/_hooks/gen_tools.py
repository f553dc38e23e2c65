"""The tool reference page, generated from the registry and the permission table.

Every tool of ``rsilab.expos.default_registry()`` with its category, the roles
``rsilab.expos.policy.TOOL_ROLES`` lets call it, its docstring and its arguments as the JSON
schema that LLMs and MCP clients see. Nothing here is written by hand, so it cannot drift.
"""

from __future__ import annotations

from typing import Any

from _cells import cell

from rsilab.expos import default_registry, policy
from rsilab.expos.registry import Category, Tool
from rsilab.records import Role

_RECORD_ID = r"^[a-z]+-[0-9a-f]{6,}$"


def _literal(value: Any) -> str:
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`' if value else '`""`'
    return f"`{value}`"


def _bounds(schema: dict[str, Any]) -> list[str]:
    notes = []
    for low, high, unit in (
        ("minimum", "maximum", ""),
        ("minLength", "maxLength", " chars"),
        ("minItems", "maxItems", " items"),
    ):
        lo, hi = schema.get(low), schema.get(high)
        if lo is not None and hi is not None:
            notes.append(f"{lo}..{hi}{unit}")
        elif lo is not None:
            notes.append(f">= {lo}{unit}")
        elif hi is not None:
            notes.append(f"<= {hi}{unit}")
    return notes


def type_of(schema: dict[str, Any], defs: dict[str, Any]) -> str:
    """A short, readable type for a JSON schema fragment."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        target = defs[name]
        if "enum" in target:
            return "one of " + ", ".join(_literal(v) for v in target["enum"])
        return f"`{name}` object"
    if "enum" in schema:
        return "one of " + ", ".join(_literal(v) for v in schema["enum"])
    if "anyOf" in schema:
        arms = [a for a in schema["anyOf"] if a.get("type") != "null"]
        text = " or ".join(type_of(a, defs) for a in arms)
        return text + " or null" if len(arms) < len(schema["anyOf"]) else text
    kind = schema.get("type", "any JSON value")
    if kind == "array":
        text = "list of " + type_of(schema.get("items", {}), defs)
    elif kind == "object":
        text = "object"
    elif kind == "string" and schema.get("pattern") == _RECORD_ID:
        text = "record id"
    else:
        text = str(kind)
    notes = _bounds(schema)
    if kind == "string" and "pattern" in schema and schema["pattern"] != _RECORD_ID:
        notes.append(f"pattern `{schema['pattern']}`")
    return f"{text} ({', '.join(notes)})" if notes else text


def _arguments(tool: Tool) -> list[str]:
    schema = tool.input_schema()
    props: dict[str, Any] = schema.get("properties", {})
    if not props:
        return ["No arguments."]
    defs = schema.get("$defs", {})
    required = set(schema.get("required", []))
    lines = ["| argument | type | default | description |", "|---|---|---|---|"]
    for name, prop in props.items():
        default = "required" if name in required else _literal(prop.get("default"))
        lines.append(
            f"| `{name}` | {cell(type_of(prop, defs))} | {default} "
            f"| {cell(prop.get('description') or '')} |"
        )
    for name, target in defs.items():
        if "properties" not in target:
            continue
        fields = ", ".join(
            f"`{key}` ({cell(type_of(value, defs))})" for key, value in target["properties"].items()
        )
        lines += ["", f"`{name}`: {cell(target.get('description', ''))} Fields: {fields}."]
    return lines


def roles_of(name: str) -> str:
    """The roles that may call ``name``, in the order of the Role enum."""
    allowed = policy.TOOL_ROLES.get(name, frozenset())
    if not allowed:
        return "none (deny by default: the tool is missing from the permission table)"
    if allowed == frozenset(Role):
        return "every role"
    return ", ".join(f"`{role.value}`" for role in Role if role in allowed)


def render() -> str:
    """The whole page, as Markdown."""
    tools = default_registry().all()
    lines = [
        "# Tool reference",
        "",
        "Generated when the site is built, from `rsilab.expos.default_registry()` (each tool's",
        "docstring and the JSON schema of its arguments, exactly what LLMs and MCP clients see)",
        "and `rsilab.expos.policy.TOOL_ROLES` (who may call it). `rsilab tools --json` prints the",
        "same from a terminal. How a call is checked and recorded is in [Tools](../tools.md).",
        "",
        f"{len(tools)} tools in {len({t.category for t in tools})} categories.",
        "",
        "| tool | category | roles | what it does |",
        "|---|---|---|---|",
    ]
    for tool in tools:
        lines.append(
            f"| [`{tool.name}`](#{tool.name}) | {tool.category.value} | {roles_of(tool.name)} "
            f"| {cell(tool.summary)} |"
        )
    for category in Category:
        members = [t for t in tools if t.category is category]
        if not members:
            continue
        lines += ["", f"## {category.value.capitalize()}"]
        for tool in members:
            lines += [
                "",
                f"### {tool.name}",
                "",
                f"**Category:** {category.value}. **Roles:** {roles_of(tool.name)}.",
                "",
                tool.description,
                "",
                *_arguments(tool),
            ]
    return "\n".join(lines) + "\n"
