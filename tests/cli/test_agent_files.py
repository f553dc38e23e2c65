"""Under ``rsilab agent``, the agent owns its workspace from the first moment; its session is in
the ledger; its installation can be bound read-only; its output past the cap is dropped, not
fatal.

The agent is a stdlib-only Python script run inside the real sandbox. Before any ``run_job``
it prepares the workspace and writes a file into a new subfolder through MCP (host-side
writes), then creates, edits, appends to, renames and deletes files everywhere in the
workspace with plain system calls, as a coding agent's own tools do.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rsilab.records import Job, Outcome
from rsilab.store import Lab, verify_store
from tests.cli.helpers import explain, rsilab
from tests.cli.test_agent import report_of

FILE_AGENT = r"""
import json, os, shlex, subprocess, sys

bridge = subprocess.Popen(shlex.split(os.environ["RSILAB_MCP_COMMAND"]),
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
def call(number, method, params):
    bridge.stdin.write(json.dumps({"jsonrpc": "2.0", "id": number, "method": method,
                                   "params": params}) + "\n")
    bridge.stdin.flush()
    while True:
        message = json.loads(bridge.stdout.readline())
        if message.get("id") == number:
            return message
call(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "files", "version": "0"}})
bridge.stdin.write('{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
bridge.stdin.flush()
tools = {
    "prepare_workspace": call(2, "tools/call", {"name": "prepare_workspace", "arguments": {}}),
    "write_file": call(3, "tools/call", {"name": "write_file", "arguments": {
        "path": "made/by/host.txt", "content": "host\n"}}),
}
bridge.stdin.close()
bridge.wait()

def append(path, text):
    with open(path, "a") as handle:
        handle.write(text)

def edit(path, old, new):
    with open(path, "r+") as handle:
        text = handle.read().replace(old, new)
        handle.seek(0)
        handle.write(text)
        handle.truncate()

def touch(path):
    with open(path, "a"):
        os.utime(path)

ops = {
    "create": lambda: open("new.txt", "w").write("new\n"),
    "edit_in_place": lambda: edit("config.json", '"width": 16', '"width": 32'),
    "append": lambda: append("train.py", "\n# appended\n"),
    "append_shell": lambda: subprocess.run(["sh", "-c", "echo shell >> harness.toml"], check=True),
    "touch_data_in": lambda: touch("data-in/train.jsonl"),
    "create_in_data_in": lambda: touch("data-in/notes.txt"),
    "append_host_subfolder": lambda: append("made/by/host.txt", "agent\n"),
    "create_host_subfolder": lambda: open("made/by/agent.txt", "w").write("a\n"),
    "mkdir_and_create": lambda: (os.makedirs("deep/er"), open("deep/er/x.txt", "w").write("x")),
    "rename": lambda: os.rename("new.txt", "made/renamed.txt"),
    "rename_folder": lambda: os.rename("made/by", "made/by2"),
    "delete": lambda: os.remove("predict.py"),
    "delete_in_data_in": lambda: os.remove("data-in/dev.jsonl"),
    "delete_folder": lambda: (os.remove("deep/er/x.txt"), os.rmdir("deep/er")),
}
done = {}
for name, op in ops.items():
    try:
        op()
        done[name] = "ok"
    except Exception as exc:
        done[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps({"tools": {k: v["result"].get("isError") for k, v in tools.items()},
                  "ops": done}))
"""

FLOOD = r"""
import os, sys
chunk = b"x" * (1 << 20)
for _ in range(64):
    os.write(1, chunk)
os.write(1, b"y" * 1000)
os.write(2, b"still here\n")
sys.exit(0)
"""


@pytest.fixture
def synthetic_lab(tmp_path: Path) -> tuple[Path, str]:
    """A lab with a baseline of the synthetic task (2 seeds) and a campaign on it."""
    lab = tmp_path / "lab"
    for args in (("init",), ("baseline", "synthetic", "--seeds", "2")):
        result = rsilab(*args, "--lab", lab)
        assert result.exit_code == 0, explain(result)
    result = rsilab("campaign", "new", "synthetic", "--lab", lab)
    assert result.exit_code == 0, explain(result)
    return lab, result.stdout.strip()


@pytest.mark.usefixtures("needs_bwrap")
def test_the_agent_owns_its_workspace_before_any_job(synthetic_lab: tuple[Path, str]) -> None:
    lab, campaign_id = synthetic_lab
    args: list[str | Path] = ["agent", "--lab", lab, "--campaign", "latest", "--actor", "f-1"]
    result = rsilab(*args, "--", "python", "-c", FILE_AGENT)
    assert result.exit_code == 0, explain(result)
    report = report_of(result.stdout)
    assert report["tools"] == {"prepare_workspace": False, "write_file": False}
    assert report["ops"] == {name: "ok" for name in report["ops"]} and len(report["ops"]) == 14

    workspace = lab / "workspaces" / campaign_id / "f-1"
    assert '"width": 32' in (workspace / "config.json").read_text()
    assert (workspace / "train.py").read_text().endswith("\n# appended\n")
    assert (workspace / "harness.toml").read_text().endswith("shell\n")
    assert (workspace / "made" / "by2" / "host.txt").read_text() == "host\nagent\n"
    assert (workspace / "made" / "renamed.txt").read_text() == "new\n"
    assert not (workspace / "predict.py").exists() and not (workspace / "deep" / "er").exists()
    assert not (workspace / "data-in" / "dev.jsonl").exists()
    with Lab.open(lab) as opened:
        assert not [j for j in opened.store.query_as(Job) if j.actor == "f-1"]  # before any job
        mine = [e for e in opened.store.events(campaign_id=campaign_id) if e.actor == "f-1"]
        first, last = mine[0], mine[-1]
        assert (first.action, first.role, first.outcome) == (
            "agent_session_started",
            "worker",
            Outcome.OK,
        )
        assert first.detail.startswith("python -c ")
        assert (last.action, last.outcome, last.detail) == (
            "agent_session_ended",
            Outcome.OK,
            "exit 0",
        )
        assert last.cost is not None and last.cost.wall_s > 0
        assert [e.tool for e in mine[1:-1]] == ["prepare_workspace", "write_file"]
        assert verify_store(opened.store).ok


@pytest.mark.usefixtures("needs_bwrap")
def test_output_past_the_cap_is_dropped_and_counted(lab: Path, campaign_id: str) -> None:
    """64 MiB a stream is passed on; the 1,000 bytes after it are dropped and the agent goes on."""
    args: list[str | Path] = ["agent", "--lab", lab, "--campaign", "latest", "--actor", "loud"]
    result = rsilab(*args, "--", "python", "-c", FLOOD)
    assert result.exit_code == 0, explain(result)[:2000]
    assert result.stdout_bytes == b"x" * (64 << 20)
    assert result.stderr == "still here\n"  # written after the cap: the agent was not stopped
    with Lab.open(lab) as opened:
        (end,) = [e for e in opened.store.events() if e.action == "agent_session_ended"]
        assert end.outcome is Outcome.OK
        assert end.detail == (
            "exit 0; output past the cap dropped: 1000 bytes of stdout, 0 of stderr"
        )


@pytest.mark.usefixtures("needs_bwrap")
def test_a_bound_installation_is_visible_read_only_and_outside_the_workspace(
    tmp_path: Path, lab: Path, campaign_id: str
) -> None:
    install = tmp_path / "opt" / "agent"
    (install / "bin").mkdir(parents=True)
    (install / "bin" / "hello").write_text("#!/bin/sh\necho hello from $0\n")
    (install / "bin" / "hello").chmod(0o755)
    probe = (
        "import os, subprocess, json; p = os.environ['TOOL'];"
        "out = subprocess.run([p], capture_output=True, text=True).stdout.strip();"
        "w = os.access(os.path.dirname(p), os.W_OK);"
        "print(json.dumps({'out': out, 'writable': w, 'entries': sorted(os.listdir('.'))}))"
    )
    tool = install / "bin" / "hello"
    args: list[str | Path] = ["agent", "--lab", lab, "--campaign", "latest", "--actor", "b-1"]
    args += ["--bind-ro", install, "--env", f"TOOL={tool}", "--", "python", "-c", probe]
    result = rsilab(*args)
    assert result.exit_code == 0, explain(result)
    report = report_of(result.stdout)
    assert report == {"out": f"hello from {tool}", "writable": False, "entries": []}


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("lab/blobs", "it lies in the lab"),
        ("", "it holds the lab"),
        ("lab/workspaces/CAMPAIGN/w-1/sub", "it lies in the lab"),
        ("/usr/bin", "a place the sandbox builds itself"),
        ("/", "it holds the lab"),
        ("/proc/sys", "a place the sandbox builds itself"),
        ("missing", "not a folder"),
    ],
)
@pytest.mark.usefixtures("needs_bwrap")
def test_a_bind_that_would_show_the_lab_or_cover_the_sandbox_is_refused(
    tmp_path: Path, lab: Path, campaign_id: str, where: str, message: str
) -> None:
    folder = tmp_path / where.replace("CAMPAIGN", campaign_id) if where[:1] != "/" else Path(where)
    if where.startswith("lab/workspaces"):
        folder.mkdir(parents=True)
    with Lab.open(lab) as opened:
        head = opened.store.head()
    args: list[str | Path] = ["agent", "--lab", lab, "--campaign", "latest", "--actor", "w-1"]
    result = rsilab(*args, "--bind-ro", folder, "--", "python", "-c", "print('ran')")
    assert result.exit_code == 2, explain(result)
    error, hint = result.stderr.strip().splitlines()
    assert error.startswith(f"error: --bind-ro {folder}: ") and message in error, error
    assert hint.startswith("hint: ")
    assert "ran" not in result.stdout
    with Lab.open(lab) as opened:
        assert opened.store.head() == head  # nothing ran, nothing recorded


@pytest.mark.usefixtures("needs_bwrap")
def test_a_bind_holding_an_outside_workspace_is_refused(
    tmp_path: Path, lab: Path, campaign_id: str
) -> None:
    workspace = tmp_path / "outside" / "ws"
    workspace.mkdir(parents=True)
    args: list[str | Path] = ["agent", "--lab", lab, "--campaign", "latest", "--workspace"]
    args += [workspace, "--bind-ro", tmp_path / "outside", "--", "python", "-V"]
    result = rsilab(*args)
    assert result.exit_code == 2, explain(result)
    assert f"it holds the workspace {workspace.resolve()}" in result.stderr
