"""The parts of ``rsilab agent`` that need no sandbox run (the runs: tests/cli/test_agent.py)."""

from __future__ import annotations

import json
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from rsilab.errors import UserError
from rsilab.mcp.agent_run import (
    BRIDGE,
    CONFIG,
    LAUNCHER,
    NET,
    SOCKET,
    AgentOptions,
    agent_env,
    check_options,
    check_role,
    exit_status,
    sandbox_argv,
    write_inside,
)
from rsilab.mcp.llm_endpoints import BASE_HOSTS, plan
from rsilab.records import Campaign, Role
from rsilab.sandbox import KillReason, RunResult


def ended(exit_code: int | None, signal: int | None, killed: KillReason | None) -> RunResult:
    return RunResult(exit_code, signal, killed, b"", b"", False, False, 0.0, 0.0, 0.0)


def test_exit_status_is_the_commands() -> None:
    assert exit_status(ended(0, None, None)) == 0
    assert exit_status(ended(5, None, None)) == 5
    assert exit_status(ended(None, 15, None)) == 128 + 15
    assert exit_status(ended(None, 9, KillReason.WALL_TIME)) == 137
    assert exit_status(ended(None, 24, KillReason.CPU_TIME)) == 137


def test_main_is_refused_with_a_reason() -> None:
    check_role(Role.WORKER)
    check_role(Role.REVIEWER)
    with pytest.raises(UserError, match="steers the whole campaign") as caught:
        check_role(Role.MAIN)
    assert caught.value.hint is not None and "rsilab run" in caught.value.hint
    for role in (Role.LEADER, Role.CONTROLLER, Role.HUMAN):
        with pytest.raises(UserError, match="not a role an external agent can hold"):
            check_role(role)


def test_the_folder_shown_at_rsilab(tmp_path: Path) -> None:
    python = Path("/opt/runtime/bin/python")
    write_inside(tmp_path, python)
    bridge = tmp_path / "bin" / BRIDGE.name
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o755
    assert stat.S_IMODE(bridge.stat().st_mode) == 0o755
    assert bridge.read_text().startswith("#!/usr/bin/env python3\n")
    server = json.loads((tmp_path / CONFIG.name).read_text())["mcpServers"]["rsilab"]
    assert [server["command"], *server["args"]] == [str(python), "-I", str(BRIDGE)]
    assert server["env"] == {"RSILAB_MCP_SOCKET": str(SOCKET)}
    assert not (tmp_path / "bin" / LAUNCHER.name).exists() and not (tmp_path / NET.name).exists()


def test_endpoints_add_the_launcher_its_config_and_a_hosts_file(tmp_path: Path) -> None:
    python = Path("/opt/runtime/bin/python")
    served = plan(["llm.test:443", "localhost:8000"])
    write_inside(tmp_path, python, served)
    launcher = tmp_path / "bin" / LAUNCHER.name
    assert stat.S_IMODE(launcher.stat().st_mode) == 0o755
    assert "def splice(" in launcher.read_text()
    net = tmp_path / NET.name
    assert stat.S_IMODE(net.stat().st_mode) == 0o755
    relays = json.loads((net / "relays.json").read_text())
    assert [(r["listen"], r["port"], r["socket"]) for r in relays] == [
        (["127.77.0.1"], 443, f"{NET}/llm.test_443.sock"),
        (["127.0.0.1", "::1"], 8000, f"{NET}/localhost_8000.sock"),
    ]
    assert (net / "hosts").read_text() == BASE_HOSTS + "127.77.0.1 llm.test\n"
    assert stat.S_IMODE((net / "hosts").stat().st_mode) == 0o444

    options = AgentOptions(argv=("agent", "-p", "x"), campaign="latest", llm_endpoints=("a:1",))
    assert sandbox_argv(options, python, served) == (
        str(python),
        "-I",
        str(LAUNCHER),
        f"{NET}/relays.json",
        "--",
        "agent",
        "-p",
        "x",
    )
    assert sandbox_argv(options, python, ()) == ("agent", "-p", "x")


def test_endpoints_are_checked_with_the_other_options() -> None:
    options = AgentOptions(argv=("a",), campaign="latest", llm_endpoints=("https://h.test",))
    with pytest.raises(UserError, match="is a URL") as caught:
        check_options(options)
    assert caught.value.hint is not None and "h.test:443" in caught.value.hint


def test_the_agents_environment(campaign: Campaign) -> None:
    options = AgentOptions(argv=("a",), campaign="latest", actor="ext", env={"MODEL": "m"})
    env = agent_env(options, campaign, Path("/opt/runtime/bin/python"))
    assert shlex.split(env["RSILAB_MCP_COMMAND"]) == ["/opt/runtime/bin/python", "-I", str(BRIDGE)]
    assert env["RSILAB_MCP_SOCKET"] == str(SOCKET) and env["RSILAB_MCP_CONFIG"] == str(CONFIG)
    assert env["RSILAB_WORKSPACE"] == "/workspace"
    assert (env["RSILAB_CAMPAIGN"], env["RSILAB_ROLE"], env["RSILAB_ACTOR"]) == (
        campaign.id,
        "worker",
        "ext",
    )
    assert env["MODEL"] == "m"
    assert "RSILAB_LLM_ENDPOINTS" not in env
    served = plan(["llm.test:443", "[::1]:8000"])
    env = agent_env(options, campaign, Path("/opt/runtime/bin/python"), served)
    assert env["RSILAB_LLM_ENDPOINTS"] == "llm.test:443 [::1]:8000"


_MODES_UNDER_UMASK = """
import json, os, stat, sys
from pathlib import Path
from rsilab.mcp.agent_run import write_inside
from rsilab.mcp.llm_endpoints import plan
os.umask(int(sys.argv[1], 8))
folder = Path(sys.argv[2])
write_inside(folder, Path("/opt/runtime/bin/python"), plan(["llm.test:443"]))
modes = {str(p.relative_to(folder)): oct(stat.S_IMODE(p.stat().st_mode)) for p in folder.rglob("*")}
print(json.dumps(modes))
"""


@pytest.mark.parametrize("umask", ["077", "027", "000"])
def test_what_the_sandbox_user_reads_has_its_modes_whatever_the_umask(
    tmp_path: Path, umask: str
) -> None:
    """A launch under ``umask 077`` once left bin/ at 0700: the agent's MCP bridge could not
    be opened by the sandbox user. The umask is set in a process of its own."""
    ran = subprocess.run(
        [sys.executable, "-c", _MODES_UNDER_UMASK, umask, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(ran.stdout) == {
        "bin": "0o755",
        "bin/rsilab-mcp": "0o755",
        "bin/rsilab-net": "0o755",
        "net": "0o755",
        "net/relays.json": "0o444",
        "net/hosts": "0o444",
        "mcp.json": "0o644",
    }
