"""The tool registry: schemas from signatures and docstrings, one permission entry per tool."""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest
from pydantic import ValidationError

from rsilab.expos import Category, ToolEnv, default_registry
from rsilab.expos.policy import TOOL_ROLES
from rsilab.expos.registry import ToolRegistry, parse_docstring
from rsilab.expos.tools._base import WorkspacePath


def _sample_registry() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(Category.EXECUTION)
    def sample(
        env: ToolEnv,
        name: str,
        count: int,
        mode: Literal["fast", "slow"] = "fast",
        path: WorkspacePath | None = None,
    ) -> dict[str, Any]:
        """Do a sample thing.

        A longer description that spans
        two lines.

        Args:
            name: what to call it.
            count: how many times; the text
                goes on on a second line.
            mode: fast or slow.
            path: a file in the workspace.
        """
        return {}

    return registry


def test_schema_comes_from_the_signature() -> None:
    tool = _sample_registry().get("sample")
    assert tool is not None
    schema = tool.input_schema()
    assert schema["type"] == "object"
    assert set(schema["properties"]) == {"name", "count", "mode", "path"}
    assert sorted(schema["required"]) == ["count", "name"]
    assert schema["properties"]["count"]["type"] == "integer"
    assert schema["properties"]["mode"]["enum"] == ["fast", "slow"]
    assert schema["properties"]["mode"]["default"] == "fast"
    assert "title" not in schema
    assert [name for name, _ in tool.path_args] == ["path"]  # found inside `X | None` too


def test_docstring_args_become_descriptions() -> None:
    tool = _sample_registry().get("sample")
    assert tool is not None
    props = tool.input_schema()["properties"]
    assert props["name"]["description"] == "what to call it."
    assert props["count"]["description"] == "how many times; the text goes on on a second line."
    assert props["mode"]["description"] == "fast or slow."
    assert tool.summary == "Do a sample thing."
    assert "two lines." in tool.description
    assert "Args:" not in tool.description


def test_unknown_fields_are_refused() -> None:
    tool = _sample_registry().get("sample")
    assert tool is not None
    assert tool.input_schema()["additionalProperties"] is False
    with pytest.raises(ValidationError) as info:
        tool.args_model.model_validate({"name": "x", "count": 1, "colour": "red"})
    assert info.value.errors()[0]["type"] == "extra_forbidden"


def test_parse_docstring_splits_summary_description_and_args() -> None:
    doc = """First line
    continues here.

    Second paragraph.

    Args:
        alpha: the first.
        beta (int): the second,
            wrapped.

    Returns:
        nothing.
    """
    summary, description, args = parse_docstring(doc)
    assert summary == "First line continues here."
    assert "Second paragraph." in description
    assert "Returns:" in description
    assert args == {"alpha": "the first.", "beta": "the second, wrapped."}


def test_parse_docstring_of_nothing() -> None:
    assert parse_docstring("") == ("", "", {})


def test_function_without_docstring_is_refused() -> None:
    registry = ToolRegistry()

    def undocumented(env: ToolEnv) -> dict[str, Any]:
        return {}

    with pytest.raises(TypeError, match="docstring"):
        registry.tool(Category.DATA)(undocumented)
    assert registry.names() == []


def test_registering_a_name_twice_is_refused() -> None:
    registry = ToolRegistry()

    def twice(env: ToolEnv) -> dict[str, Any]:
        """Twice."""
        return {}

    registry.tool(Category.DATA)(twice)
    with pytest.raises(TypeError, match="twice"):
        registry.tool(Category.DATA)(twice)


def test_every_builtin_tool_is_documented_and_serialisable() -> None:
    tools = default_registry().all()
    assert tools
    for tool in tools:
        assert tool.summary.strip(), tool.name
        schema = tool.input_schema()
        json.dumps(schema)
        assert schema["type"] == "object"
        assert schema.get("additionalProperties") is False, tool.name
        for name, prop in schema.get("properties", {}).items():
            assert prop.get("description"), f"{tool.name}.{name} has no description"


def test_every_tool_has_a_permission_entry_and_vice_versa() -> None:
    names = default_registry().names()
    assert len(names) == len(set(names)) == 39
    assert set(names) == set(TOOL_ROLES)


def test_field_defaults_keep_their_constraints_and_get_descriptions() -> None:
    from pydantic import Field

    registry = ToolRegistry()

    @registry.tool(Category.DATA)
    def bounded(
        env: ToolEnv,
        items: list[int] = Field(default_factory=list, max_length=2),  # noqa: B008
        note: str = Field(default="", max_length=5, description="its own words"),
    ) -> dict[str, Any]:
        """Bounded arguments.

        Args:
            items: at most two.
            note: ignored, the Field says it.
        """
        return {}

    tool = registry.get("bounded")
    assert tool is not None
    props = tool.input_schema()["properties"]
    assert props["items"]["description"] == "at most two."
    assert props["items"]["maxItems"] == 2
    assert props["note"]["description"] == "its own words"
    with pytest.raises(ValidationError):
        tool.args_model.model_validate({"items": [1, 2, 3]})
    assert tool.args_model.model_validate({}).model_dump() == {"items": [], "note": ""}
