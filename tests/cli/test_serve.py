"""``rsilab mcp``: the command hands its options to the MCP server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rsilab.records import Role
from tests.cli.helpers import explain, rsilab


def test_mcp_passes_its_options_to_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = pytest.importorskip("rsilab.mcp.server")
    calls: list[tuple[Any, ...]] = []

    def fake_server(*args: Any) -> None:
        calls.append(args)

    monkeypatch.setattr(server, "run_stdio_server", fake_server)
    result = rsilab(
        "mcp", "--role", "worker", "--campaign", "latest", "--workspace", tmp_path,
        "--actor", "claude", "--lab", tmp_path / "lab",
    )  # fmt: skip
    assert result.exit_code == 0, explain(result)
    assert calls == [(tmp_path / "lab", Role.WORKER, "latest", tmp_path, "claude")]
    assert result.stdout == ""  # stdout belongs to the MCP protocol


def test_mcp_refusal_before_serving_is_a_user_error(lab: Path) -> None:
    pytest.importorskip("rsilab.mcp.server")
    result = rsilab("mcp", "--role", "worker", "--lab", lab)
    assert result.exit_code == 2, explain(result)
    assert result.stderr.startswith("error: ")
    assert "--campaign" in result.stderr
