"""``rsilab tools`` and ``rsilab call``."""

from __future__ import annotations

import json
from pathlib import Path

from rsilab.expos import default_registry
from rsilab.expos.policy import TOOL_ROLES
from rsilab.records import Role
from tests.cli.helpers import explain, rsilab


def _table_names(stdout: str) -> set[str]:
    known = set(default_registry().names())
    return {word for line in stdout.splitlines() for word in line.split() if word in known}


def test_tools_lists_every_tool() -> None:
    result = rsilab("tools")
    assert result.exit_code == 0, explain(result)
    assert len(default_registry().names()) == 39
    assert set(default_registry().names()) == set(TOOL_ROLES)  # each has a policy entry
    assert _table_names(result.stdout) == set(default_registry().names())
    assert "execution and state" in result.stdout


def test_tools_for_a_role_lists_only_its_tools() -> None:
    result = rsilab("tools", "--role", "worker")
    assert result.exit_code == 0, explain(result)
    worker_tools = {name for name, roles in TOOL_ROLES.items() if Role.WORKER in roles}
    assert _table_names(result.stdout) == worker_tools
    assert "create_direction" not in result.stdout


def test_tools_json_has_schemas_and_roles() -> None:
    result = rsilab("tools", "--json")
    assert result.exit_code == 0, explain(result)
    listed = json.loads(result.stdout)
    assert [t["name"] for t in listed] == default_registry().names()
    by_name = {t["name"]: t for t in listed}
    create = by_name["create_direction"]
    assert create["roles"] == ["main"]
    assert create["category"] == "execution and state"
    assert create["input_schema"]["type"] == "object"
    assert "hypothesis" in create["input_schema"]["properties"]
    assert all(t["description"] for t in listed)


def _call(lab: Path, tool: str, role: str, args: str, *extra: str | Path) -> tuple[int, str, str]:
    result = rsilab("call", tool, "--role", role, "--args", args, "--lab", lab, *extra)
    return result.exit_code, result.stdout, result.stderr


def test_call_creates_and_lists_a_direction(lab: Path, campaign_id: str, tmp_path: Path) -> None:
    args = json.dumps({"title": "wider net", "hypothesis": "more units help"})
    workspace = tmp_path / "ws"  # beside the lab: a folder holding it would be refused
    workspace.mkdir()
    code, out, err = _call(
        lab, "create_direction", "main", args, "--campaign", "latest", "--workspace", workspace
    )
    assert code == 0, err
    direction_id = json.loads(out)["id"]
    assert "recorded as event" in err
    code, out, err = _call(lab, "list_directions", "main", "{}", "--campaign", campaign_id)
    assert code == 0, err
    listed = json.loads(out)["directions"]
    assert [(d["id"], d["title"]) for d in listed] == [(direction_id, "wider net")]


def test_call_tool_error_exits_1_with_error_json(lab: Path, campaign_id: str) -> None:
    args = json.dumps({"title": "t", "hypothesis": "h"})
    code, out, _ = _call(lab, "create_direction", "worker", args, "--campaign", campaign_id)
    assert code == 1  # a tool's error, not a usage error: the call was made and recorded
    payload = json.loads(out)
    assert payload["error"] == "permission_denied"
    code, out, _ = _call(lab, "list_directions", "main", "{}")  # no campaign given
    assert code == 1
    assert "error" in json.loads(out)


def test_call_malformed_args_is_a_user_error(lab: Path) -> None:
    code, out, err = _call(lab, "list_directions", "main", '{"state": ')
    assert code == 2
    assert out == ""
    first, hint = err.splitlines()[:2]
    assert first.startswith("error: --args is not valid JSON")
    assert "column" in first
    assert hint.startswith("hint:")
    assert "Traceback" not in err


def test_call_unknown_campaign_is_a_user_error(lab: Path) -> None:
    code, _, err = _call(lab, "list_directions", "main", "{}", "--campaign", "cmp-000000000000")
    assert code == 2
    assert "rsilab campaign list" in err
