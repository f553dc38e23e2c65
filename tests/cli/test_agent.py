"""``rsilab agent``: an external agent confined to the sandbox, acting only through MCP.

The agent is ``tests/cli/agent_client.py``, run inside the real bubblewrap sandbox; it talks
JSON-RPC to the bridge the wrapper ships in, and reports what it could and could not reach.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rsilab.expos import policy
from rsilab.records import Outcome, ProtocolFlag, Role
from rsilab.store import Lab, verify_store
from rsilab.store.keys import key_dir
from rsilab.tasks import get_task
from tests.cli.helpers import explain, rsilab
from tests.sandbox.helpers import bwrap_problem

CLIENT = (Path(__file__).parent / "agent_client.py").read_text()


@pytest.fixture
def needs_bwrap() -> None:
    problem = bwrap_problem()
    if problem is not None:
        pytest.skip(f"bubblewrap is unusable here ({problem})")


@pytest.fixture
def host_port() -> Iterator[int]:
    """A TCP port the host listens on at 127.0.0.1: reachable from the host, not the sandbox."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


def report_of(stdout: str) -> dict[str, Any]:
    """The client's JSON report: the last line of stdout that parses."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            found: dict[str, Any] = json.loads(line)
            return found
    raise AssertionError(f"no report in:\n{stdout}")


@pytest.mark.usefixtures("needs_bwrap")
def test_agent_acts_only_through_the_experiment_os(
    lab: Path, campaign_id: str, host_port: int
) -> None:
    secret_paths = [lab, lab / "lab.db", key_dir()]
    secret_paths += [Path(p) for p in get_task("digits").data_sources]
    args: list[str | Path] = ["agent", "--lab", lab, "--campaign", "latest", "--actor", "ext-1"]
    args += ["--", "python", "-c", CLIENT, str(host_port), "3", *map(str, secret_paths)]
    result = rsilab(*args)

    assert result.exit_code == 3, explain(result)  # CMD's own exit status
    assert "agent stderr line" in result.stderr  # CMD's stderr streamed to ours
    report = report_of(result.stdout)
    assert report["server"] == "rsilab" and report["bridge_exit"] == 0
    assert report["tools"] == [
        name for name in report["tools"] if policy.may_call(Role.WORKER, name)
    ]
    assert "create_direction" not in report["tools"]
    # (a) tool calls work and write into the workspace the agent sees at /workspace
    assert not report["written"]["isError"], report["written"]
    assert not report["listed"]["isError"], report["listed"]
    listed = report["listed"]["structuredContent"]["entries"]
    assert [e["path"] for e in listed] == ["notes.txt"]
    assert report["seen_in_workspace"] == "from the agent"
    assert report["cwd"] == "/workspace" and report["workspace_entries"] == ["notes.txt"]
    assert report["config"]["mcpServers"]["rsilab"]["args"][-1] == "/rsilab/bin/rsilab-mcp"
    # (b) the lab, its database, the ledger keys and the task's data are not there
    assert report["visible"] == {str(p): False for p in secret_paths}
    # (c) no network: the host's listener cannot be reached
    assert report["network"] != "connected"
    # (d) a Main-only tool is refused by the dispatcher, not merely unlisted
    assert report["refused"]["isError"]

    workspace = lab / "workspaces" / campaign_id / "ext-1"
    assert (workspace / "notes.txt").read_text() == "from the agent"
    with Lab.open(lab) as opened:
        events = [e for e in opened.store.events(campaign_id=campaign_id) if e.tool]
        assert [(e.tool, e.actor, e.role, e.outcome) for e in events] == [
            ("write_file", "ext-1", "worker", Outcome.OK),
            ("list_files", "ext-1", "worker", Outcome.OK),
            ("create_direction", "ext-1", "worker", Outcome.DENIED),
        ]
        assert all(e.campaign_id == campaign_id for e in events)
        flags = opened.store.query_as(ProtocolFlag)
        assert [(f.tool, f.actor) for f in flags] == [("create_direction", "ext-1")]
        report_ok = verify_store(opened.store)
        assert report_ok.ok, report_ok.problems


@pytest.mark.usefixtures("needs_bwrap")
def test_a_workspace_holding_the_lab_does_not_show_it(
    tmp_path: Path, lab: Path, campaign_id: str
) -> None:
    assert lab.parent == tmp_path
    (tmp_path / "train.py").write_text("print('hi')\n")
    code = (
        "import os; print(sorted(os.listdir('.'))); print(os.listdir('lab')); "
        "print(os.environ['RSILAB_CAMPAIGN'], os.environ['RSILAB_ROLE'])"
    )
    args: list[str | Path] = ["agent", "--lab", lab, "--campaign", campaign_id]
    result = rsilab(*args, "--workspace", tmp_path, "--", "python", "-c", code)
    assert result.exit_code == 0, explain(result)
    listing, lab_inside, who = result.stdout.splitlines()[-3:]
    assert "train.py" in listing
    assert lab_inside == "[]"  # the lab folder is covered by an empty one
    assert who == f"{campaign_id} worker"


@pytest.mark.usefixtures("needs_bwrap")
def test_a_command_the_sandbox_cannot_find_is_a_user_error(lab: Path, campaign_id: str) -> None:
    result = rsilab("agent", "--lab", lab, "--campaign", "latest", "--", "no-such-agent-x")
    assert result.exit_code == 1, explain(result)
    assert "not a program the sandbox can run" in result.stderr
    assert "hint:" in result.stderr


def test_the_process_sandbox_is_refused(
    lab: Path, campaign_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    with Lab.open(lab) as opened:
        head = opened.store.head()
    result = rsilab("agent", "--lab", lab, "--campaign", "latest", "--", "python", "-V")
    assert result.exit_code == 1, explain(result)
    assert "RSILAB_SANDBOX=process" in result.stderr and "bubblewrap" in result.stderr
    assert "rsilab mcp" in result.stderr  # the hint names the unconfined alternative
    with Lab.open(lab) as opened:
        assert opened.store.head() == head  # nothing ran, nothing recorded


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--campaign", "latest"], "no command to run"),
        (["--campaign", "latest", "--"], "no command to run"),
        (["--", "python"], "none was given"),
        (["--campaign", "cmp-0123456789ab", "--", "python"], "no campaign 'cmp-0123456789ab'"),
        (["--campaign", "latest", "--role", "main", "--", "python"], "main role cannot be run"),
        (["--campaign", "latest", "--role", "human", "--", "python"], "not a role"),
        (["--campaign", "latest", "--actor", "../x", "--", "python"], "not a usable name"),
        (["--campaign", "latest", "--wall", "soon", "--", "python"], "bad --wall"),
        (["--campaign", "latest", "--memory", "lots", "--", "python"], "bad --memory"),
        (["--campaign", "latest", "--env", "A-B=1", "--", "python"], "cannot be passed"),
        (["--campaign", "latest", "--env", "PATH=/x", "--", "python"], "cannot be passed"),
    ],
)
def test_bad_input_is_a_user_error(
    lab: Path, campaign_id: str, args: list[str], message: str
) -> None:
    result = rsilab("agent", "--lab", lab, *args)
    assert result.exit_code == 1, explain(result)
    assert message in result.stderr, explain(result)
    assert "hint:" in result.stderr


def test_workspace_inside_the_lab_or_missing_is_refused(
    tmp_path: Path, lab: Path, campaign_id: str
) -> None:
    for folder, message in [(lab / "blobs", "inside the lab"), (tmp_path / "no", "not a folder")]:
        args = ["--campaign", "latest", "--workspace", str(folder), "--", "python"]
        result = rsilab("agent", "--lab", lab, *args)
        assert result.exit_code == 1, explain(result)
        assert message in result.stderr, explain(result)
