"""The real Claude Code CLI works as a Worker under ``rsilab agent``, driven offline.

Claude Code (installed by ``make agent-clis`` into ``.tools/claude-code``, bound read-only
with ``--bind-ro``) talks to the project's scripted LLM server over the streaming Messages
API, through the ``--llm-endpoint`` relay, and reaches the Experiment OS through
``/rsilab/mcp.json``. The script plays a worker's session: prepare the workspace, edit the
config in place with Claude's Edit tool, append to a file with its Bash tool, write into a
new subfolder with its Write tool, run a recorded training job, and propose the workspace,
which the controller judges on private data and accepts (the config is clearly better). The
bytecode Python leaves in the workspace is not part of the candidate.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rsilab.agents.llm.scripted import RecordedRequest, Reply, Respond, ScriptedServer, tool_call
from rsilab.records import Candidate, CandidateState, Job, JobStatus
from rsilab.store import Lab, verify_store
from rsilab.tasks import get_task
from tests.cli.helpers import explain, rsilab
from tests.sandbox.helpers import bwrap_problem
from tests.synthetic_configs import BETTER

INSTALL = Path(__file__).resolve().parents[2] / ".tools" / "claude-code"
CLAUDE = INSTALL / "node_modules" / ".bin" / "claude"
MODEL = "claude-sonnet-4-5"
NOTE = "\n# tuned under rsilab agent\n"

Plan = list[tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]]


def worker_plan(direction_id: str, config_text: str) -> Plan:
    """The tool calls of the session, in order; each makes its arguments from what the
    earlier calls returned (tool name -> its result's JSON)."""
    better = json.dumps(BETTER, indent=2) + "\n"
    return [
        ("mcp__rsilab__prepare_workspace", lambda seen: {}),
        ("Read", lambda seen: {"file_path": "/workspace/config.json"}),
        (
            "Edit",
            lambda seen: {
                "file_path": "/workspace/config.json",
                "old_string": config_text,
                "new_string": better,
            },
        ),
        (
            "Bash",
            lambda seen: {
                "command": f"printf {json.dumps(NOTE)} >> train.py && python -c 'import synth'",
                "description": "note the change in train.py; check synth imports",
            },
        ),
        (
            "Write",
            lambda seen: {"file_path": "/workspace/notes/plan.md", "content": "bolder config\n"},
        ),
        (
            "mcp__rsilab__create_experiment",
            lambda seen: {
                "direction_id": direction_id,
                "description": "adam, wider, more epochs",
                "config": BETTER,
            },
        ),
        (
            "mcp__rsilab__run_job",
            lambda seen: {
                "experiment_id": seen["mcp__rsilab__create_experiment"]["id"],
                "kind": "train",
            },
        ),
        (
            "mcp__rsilab__finish_experiment",
            lambda seen: {
                "experiment_id": seen["mcp__rsilab__create_experiment"]["id"],
                "status": "succeeded",
            },
        ),
        (
            "mcp__rsilab__propose_candidate",
            lambda seen: {
                "experiment_id": seen["mcp__rsilab__create_experiment"]["id"],
                "base_version_id": seen["mcp__rsilab__prepare_workspace"]["base_version_id"],
            },
        ),
    ]


def brain(plan: Plan, problems: list[str]) -> Callable[[RecordedRequest], Reply]:
    """The model: the next call of ``plan`` after the results the conversation holds; a
    failed call, or a request without tools (a side request), ends with text."""

    def answer(request: RecordedRequest) -> Reply:
        if not request.tool_names():
            return Reply("ok")
        results = request.tool_results()
        seen: dict[str, Any] = {}
        for result in results:
            if result.is_error:
                problems.append(f"{result.name} failed: {result.content}")
                return Reply("stopping: a call failed")
            if result.name.startswith("mcp__"):
                seen[result.name] = result.first_line_json()
        if len(results) == len(plan):
            return Reply("proposed the workspace; done")
        name, arguments = plan[len(results)]
        if name not in request.tool_names():
            problems.append(f"{name} is not offered: {request.tool_names()}")
            return Reply("stopping: a tool is missing")
        return tool_call(name, arguments(seen))

    return answer


def test_claude_code_works_as_a_worker_under_rsilab_agent(tmp_path: Path) -> None:
    if not CLAUDE.exists():
        pytest.skip(f"Claude Code is not installed at {INSTALL}: run `make agent-clis` (needs npm)")
    problem = bwrap_problem()
    if problem is not None:
        pytest.skip(f"bubblewrap is unusable here ({problem})")
    lab = tmp_path / "lab"
    for command in (("init",), ("baseline", "synthetic"), ("campaign", "new", "synthetic")):
        result = rsilab(*command, "--lab", lab)
        assert result.exit_code == 0, explain(result)
    campaign_id = result.stdout.strip()
    direction = {"title": "bolder training", "hypothesis": "adam and more epochs fit better"}
    result = rsilab(
        "call", "create_direction", "--role", "main", "--campaign", "latest",
        "--args", json.dumps(direction), "--lab", lab,
    )  # fmt: skip
    assert result.exit_code == 0, explain(result)
    direction_id = json.loads(result.stdout)["id"]
    config_text = (get_task("synthetic").harness / "config.json").read_text()
    problems: list[str] = []
    plan = worker_plan(direction_id, config_text)

    with ScriptedServer([Respond(brain(plan, problems))] * (len(plan) + 5)) as server:
        port = server.base_url.rsplit(":", 1)[1]
        variables = {
            "ANTHROPIC_BASE_URL": server.base_url,
            "ANTHROPIC_API_KEY": "sk-test",
            "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "ENABLE_TOOL_SEARCH": "false",
        }
        args: list[str | Path] = ["agent", "--lab", lab, "--campaign", "latest"]
        args += ["--actor", "claude-1", "--llm-endpoint", f"127.0.0.1:{port}"]
        args += ["--bind-ro", INSTALL]
        for name, value in variables.items():
            args += ["--env", f"{name}={value}"]
        args += ["--", CLAUDE, "-p", "Improve the system and propose it.", "--model", MODEL]
        args += ["--output-format", "stream-json", "--verbose"]
        args += ["--dangerously-skip-permissions"]
        args += ["--strict-mcp-config", "--mcp-config", "/rsilab/mcp.json"]
        result = rsilab(*args)
        requests = server.requests

    assert not problems, problems
    assert result.exit_code == 0, explain(result)
    assert all(r.body.get("stream") is True for r in requests)  # Claude Code streams
    final = json.loads(result.stdout.strip().splitlines()[-1])
    assert (final["type"], final["result"]) == ("result", "proposed the workspace; done")

    workspace = lab / "workspaces" / campaign_id / "claude-1"
    assert json.loads((workspace / "config.json").read_text()) == BETTER  # edited in place
    assert (workspace / "train.py").read_text().endswith(NOTE)  # appended
    assert (workspace / "notes" / "plan.md").read_text() == "bolder config\n"  # a new subfolder
    with Lab.open(lab) as opened:
        jobs = [j for j in opened.store.query_as(Job) if j.actor == "claude-1"]
        assert [(j.kind, j.status) for j in jobs] == [("train", JobStatus.SUCCEEDED)]
        (candidate,) = [c for c in opened.store.query_as(Candidate) if c.proposer == "claude-1"]
        assert candidate.state is CandidateState.ACCEPTED, candidate.reason
        tree = {e["path"] for e in opened.artifacts.manifest(candidate.harness_sha256)}
        assert {"config.json", "train.py", "notes/plan.md"} <= tree
        assert not [p for p in tree if p.startswith((".claude", "data-in/", "runs/"))], tree
        assert (workspace / "__pycache__").is_dir()
        assert not [p for p in tree if "__pycache__" in p or p.endswith(".pyc")], tree
        # the digest judged is the workspace's, less what the Experiment OS wrote and bytecode
        copy = tmp_path / "expected"
        skip = shutil.ignore_patterns("data-in", "runs", "__pycache__")
        shutil.copytree(workspace, copy, symlinks=True, ignore=skip)
        assert opened.artifacts.put_tree(copy).sha256 == candidate.harness_sha256
        actions = [e.action for e in opened.store.events() if e.actor == "claude-1"]
        assert actions[0] == "agent_session_started" and actions[-1] == "agent_session_ended"
        assert "agent_net_connect" in actions
        verified = verify_store(opened.store)
        assert verified.ok, verified.problems
    assert os.access(CLAUDE, os.X_OK)
