"""``rsilab agent``: an external agent confined to the sandbox, acting only through MCP.

The agent is ``tests/cli/agent_client.py``, run inside the real bubblewrap sandbox; it talks
JSON-RPC to the bridge the wrapper ships in, and reports what it could and could not reach.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rsilab.expos import policy
from rsilab.mcp.agent_run import NET_ACTION
from rsilab.records import Outcome, ProtocolFlag, Role
from rsilab.store import Lab, verify_store
from rsilab.store.keys import key_dir
from rsilab.tasks import get_task
from tests.cli.helpers import explain, rsilab

CLIENT = (Path(__file__).parent / "agent_client.py").read_text()
NET_CLIENT = """
import json, os, socket, sys, urllib.request

first, second, unlisted, status = map(int, sys.argv[1:])

def get(url):
    try:
        with urllib.request.urlopen(url, timeout=20) as answer:
            return answer.read().decode()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"

def connect(host, port):
    try:
        with socket.create_connection((host, port), timeout=5):
            return "connected"
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"

print(json.dumps({
    "by_address": get(f"http://127.0.0.1:{first}/by-address"),
    "by_name": get(f"http://localhost:{second}/by-name"),
    "llm.test": socket.gethostbyname("llm.test"),
    "endpoints": os.environ["RSILAB_LLM_ENDPOINTS"],
    "other_port": connect("llm.test", second),
    "unlisted_port": connect("localhost", unlisted),
}))
sys.exit(status)
"""


@pytest.fixture
def host_port() -> Iterator[int]:
    """A TCP port the host listens on at 127.0.0.1: reachable from the host, not the sandbox."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


class _Hello(http.server.BaseHTTPRequestHandler):
    """Answers every GET with the server's name and the path asked for."""

    def do_GET(self) -> None:
        body = f"{self.server.server_name} {self.path}".encode()  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads the answers, not the log."""


@pytest.fixture
def http_servers() -> Iterator[list[int]]:
    """Two HTTP servers on the host's 127.0.0.1 (answering "llm-1 PATH", "llm-2 PATH")."""
    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello) for _ in range(2)]
    for number, server in enumerate(servers, 1):
        server.server_name = f"llm-{number}"
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield [server.server_address[1] for server in servers]
    for server in servers:
        server.shutdown()
        server.server_close()


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
def test_a_workspace_holding_the_lab_is_refused(
    tmp_path: Path, lab: Path, campaign_id: str
) -> None:
    """``rsilab agent --workspace .`` with the lab in ./: the agent's jobs (``run_job``) would
    run there too, so the folder is refused before anything runs, in one line."""
    assert lab.parent == tmp_path
    with Lab.open(lab) as opened:
        head = opened.store.head()
    args: list[str | Path] = ["agent", "--lab", lab, "--campaign", campaign_id]
    result = rsilab(*args, "--workspace", tmp_path, "--", "python", "-c", "print('ran')")
    assert result.exit_code == 2, explain(result)
    error, hint = result.stderr.strip().splitlines()
    assert error.startswith(f"error: workspace {tmp_path} holds {lab.resolve()}")
    assert hint.startswith("hint: use a folder that does not contain the lab")
    assert "ran" not in result.stdout
    with Lab.open(lab) as opened:
        assert opened.store.head() == head  # nothing ran, nothing recorded


@pytest.mark.usefixtures("needs_bwrap")
def test_a_command_the_sandbox_cannot_find_is_a_user_error(lab: Path, campaign_id: str) -> None:
    result = rsilab("agent", "--lab", lab, "--campaign", "latest", "--", "no-such-agent-x")
    assert result.exit_code == 2, explain(result)
    assert "not a program the sandbox can run" in result.stderr
    assert "hint:" in result.stderr


def test_the_process_sandbox_is_refused(
    lab: Path, campaign_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    with Lab.open(lab) as opened:
        head = opened.store.head()
    result = rsilab("agent", "--lab", lab, "--campaign", "latest", "--", "python", "-V")
    assert result.exit_code == 2, explain(result)
    assert "RSILAB_SANDBOX=process" in result.stderr and "bubblewrap" in result.stderr
    assert "rsilab mcp" in result.stderr  # the hint names the unconfined alternative
    with Lab.open(lab) as opened:
        assert opened.store.head() == head  # nothing ran, nothing recorded


NINE_ENDPOINTS = [f"--llm-endpoint=h.test:{port}" for port in range(1, 10)]


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
        (["--campaign", "latest", "--llm-endpoint", "https://h.test/v1", "--", "python"], "a URL"),
        (["--campaign", "latest", "--llm-endpoint", "h.test", "--", "python"], "has no port"),
        (["--campaign", "latest", "--llm-endpoint", "h.test:0", "--", "python"], "1 to 65535"),
        (["--campaign", "latest", "--llm-endpoint", "10.1.2.3:80", "--", "python"], "no route"),
        (["--campaign", "latest", *["--llm-endpoint", "h.test:1"] * 2, "--", "python"], "both"),
        (["--campaign", "latest", *NINE_ENDPOINTS, "--", "python"], "at most 8"),
    ],
)
def test_bad_input_is_a_user_error(
    lab: Path, campaign_id: str, args: list[str], message: str
) -> None:
    result = rsilab("agent", "--lab", lab, *args)
    assert result.exit_code == 2, explain(result)
    assert message in result.stderr, explain(result)
    assert "hint:" in result.stderr


def test_workspace_inside_the_lab_or_missing_is_refused(
    tmp_path: Path, lab: Path, campaign_id: str
) -> None:
    for folder, message in [(lab / "blobs", "inside the lab"), (tmp_path / "no", "not a folder")]:
        args = ["--campaign", "latest", "--workspace", str(folder), "--", "python"]
        result = rsilab("agent", "--lab", lab, *args)
        assert result.exit_code == 2, explain(result)
        assert message in result.stderr, explain(result)


@pytest.mark.usefixtures("needs_bwrap")
def test_the_agent_reaches_its_llm_endpoints_and_nothing_else(
    lab: Path, campaign_id: str, http_servers: list[int], host_port: int
) -> None:
    first, second = http_servers
    endpoints = [f"127.0.0.1:{first}", f"localhost:{second}", f"llm.test:{first}"]
    if os.geteuid() == 0:  # as root, the sandbox user may listen on a low port too
        endpoints.append("llm.test:443")
    args: list[str | Path] = ["agent", "--lab", lab, "--campaign", "latest", "--actor", "ext-2"]
    for endpoint in endpoints:
        args += ["--llm-endpoint", endpoint]
    args += ["--", "python", "-c", NET_CLIENT, str(first), str(second), str(host_port), "5"]
    result = rsilab(*args)

    assert result.exit_code == 5, explain(result)  # CMD's own exit status, behind the relay
    report = report_of(result.stdout)
    assert report["by_address"] == "llm-1 /by-address"
    assert report["by_name"] == "llm-2 /by-name"
    assert report["llm.test"] == "127.77.0.1"  # a name of its own, on the sandbox's loopback
    assert report["endpoints"] == " ".join(endpoints)
    # only the endpoints: another port of an endpoint's host, or the host's other listener,
    # cannot be reached
    assert report["other_port"] != "connected"
    assert report["unlisted_port"] != "connected"

    with Lab.open(lab) as opened:
        events = [e for e in opened.store.events(campaign_id=campaign_id) if e.action == NET_ACTION]
        reached = sorted(e.detail.split(": ")[0] for e in events)
        assert reached == sorted([f"127.0.0.1:{first}", f"localhost:{second}"])
        for event in events:
            assert (event.actor, event.role, event.outcome) == ("ext-2", "worker", Outcome.OK)
            found = re.search(r": (\d+) bytes sent, (\d+) received", event.detail)
            assert found is not None and int(found[1]) > 0 and int(found[2]) > 0, event.detail
            assert event.cost is not None
        assert verify_store(opened.store).ok
