"""``rsilab baseline``, ``versions`` and ``rollback`` on the built-in ``synthetic`` task."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from rsilab.controller.host import HostController
from rsilab.executors.local import LocalExecutor
from rsilab.records import Candidate, CandidateState
from rsilab.sandbox.select import default_sandbox
from rsilab.store import Lab
from rsilab.tasks import get_task
from tests.cli.helpers import explain, rsilab
from tests.synthetic_configs import BETTER as ROBUST_BETTER

"""Clearly better than synthetic's default on quality, and on robustness too (no regression
can come from noise)."""


@pytest.fixture(autouse=True)
def process_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")


def _versions(lab: Path) -> dict[str, Any]:
    result = rsilab("versions", "synthetic", "--json", "--lab", lab)
    assert result.exit_code == 0, explain(result)
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def _baseline(lab: Path) -> str:
    result = rsilab("baseline", "synthetic", "--lab", lab)
    assert result.exit_code == 0, explain(result)
    return str(_versions(lab)["head_id"])


def _judge(lab: Path, tmp_path: Path, name: str, config: dict[str, Any] | str) -> Candidate:
    """Propose synthetic's harness with ``config`` (a dict, or raw text) and judge it."""
    folder = tmp_path / name
    shutil.copytree(get_task("synthetic").harness, folder)
    text = config if isinstance(config, str) else json.dumps(config)
    (folder / "config.json").write_text(text)
    with Lab.open(lab) as opened:
        sandbox = default_sandbox()
        executor = LocalExecutor(sandbox, opened.artifacts, slots=3)
        try:
            controller = HostController(opened, get_task("synthetic"), executor)
            sha = opened.artifacts.put_tree(folder).sha256
            proposed = controller.propose(harness_sha256=sha, campaign_id=None, proposer="t")
            return controller.judge(proposed.id)
        finally:
            executor.shutdown()
            sandbox.close()


def test_baseline_then_versions_as_text_and_json(lab: Path) -> None:
    result = rsilab("baseline", "synthetic", "--seeds", "2", "--lab", lab)
    assert result.exit_code == 0, explain(result)
    assert "baseline synthetic/main H0/M0 ver-" in result.stdout
    assert "quality" in result.stdout and "robustness" in result.stdout

    data = _versions(lab)
    assert data["task"] == "synthetic" and data["lineage"] == "main"
    assert data["candidates"] == []
    [version] = data["versions"]
    assert version["head"] and version["id"] == data["head_id"] and version["label"] == "H0/M0"
    assert version["parent_id"] is None and version["rollback_of"] is None
    assert version["decision"].startswith("baseline")
    assert set(version["scores"]) == {"quality", "robustness"}
    for score in version["scores"].values():
        assert score["low"] <= score["value"] <= score["high"]

    text = rsilab("versions", "synthetic", "--lab", lab)
    assert text.exit_code == 0, explain(text)
    for part in ("H0/M0", version["id"], version["harness_sha256"][:12], "*", "quality"):
        assert part in text.stdout
    assert "no candidates yet" in text.stdout


def test_a_second_baseline_is_a_user_error_with_a_hint(lab: Path) -> None:
    _baseline(lab)
    again = rsilab("baseline", "synthetic", "--lab", lab)
    assert again.exit_code == 2, explain(again)
    assert "error: synthetic/main already has a baseline" in again.stderr
    assert "hint: see it with: rsilab versions synthetic --lineage main" in again.stderr
    assert "Traceback" not in again.stderr + again.stdout


def test_versions_of_a_missing_lineage_is_a_user_error(lab: Path) -> None:
    result = rsilab("versions", "synthetic", "--lineage", "nope", "--lab", lab)
    assert result.exit_code == 2, explain(result)
    assert "has no lineage 'nope'" in result.stderr
    assert "rsilab baseline synthetic --lineage nope" in result.stderr


def test_rollback_appends_a_version_and_the_ledger_verifies(lab: Path, tmp_path: Path) -> None:
    v0 = _baseline(lab)
    better = _judge(lab, tmp_path, "better", ROBUST_BETTER)
    assert better.state is CandidateState.ACCEPTED, better.reason
    broken = _judge(lab, tmp_path, "broken", "not json")
    assert broken.state is CandidateState.INVALID, broken.reason

    data = _versions(lab)
    assert [v["label"] for v in data["versions"]] == ["H0/M0", "H1/M1"]
    v1 = data["versions"][1]
    assert v1["head"] and v1["parent_id"] == v0 and v1["candidate_id"] == better.id
    candidates = {c["id"]: c for c in data["candidates"]}
    assert candidates[better.id]["state"] == "accepted"
    assert candidates[better.id]["compared_to"] == v0
    assert candidates[better.id]["parent_version_id"] == v0
    assert candidates[broken.id]["state"] == "invalid" and candidates[broken.id]["reason"]
    text = rsilab("versions", "synthetic", "--lab", lab)
    assert better.id in text.stdout and "invalid" in text.stdout, explain(text)

    result = rsilab("rollback", "synthetic", "H0/M0", "--lab", lab)
    assert result.exit_code == 0, explain(result)
    assert f"a copy of {v0}" in result.stdout
    after = _versions(lab)
    assert [v["label"] for v in after["versions"]] == ["H0/M0", "H1/M1", "H0/M0"]
    restored = after["versions"][2]
    assert restored["head"] and after["head_id"] == restored["id"]
    assert restored["rollback_of"] == v0 and restored["parent_id"] == v1["id"]
    assert restored["harness_sha256"] == data["versions"][0]["harness_sha256"]
    assert after["versions"][:2] == [dict(v, head=False) for v in data["versions"]]
    with Lab.open(lab) as opened:
        assert opened.store.events()[-1].action == "rollback"
    verified = rsilab("verify", "--deep", "--lab", lab)
    assert verified.exit_code == 0, explain(verified)

    head_again = rsilab("rollback", "synthetic", restored["id"], "--lab", lab)
    assert head_again.exit_code == 2 and "already the head" in head_again.stderr
    unknown = rsilab("rollback", "synthetic", "ver-000000000000", "--lab", lab)
    assert unknown.exit_code == 2 and "is not a version of synthetic/main" in unknown.stderr
    assert "rsilab versions synthetic" in unknown.stderr


def test_help_lists_the_commands() -> None:
    result = rsilab("--help")
    assert result.exit_code == 0, explain(result)
    for name in ("baseline", "versions", "rollback", "gc"):
        assert f" {name} " in result.stdout


def test_a_worker_proposes_through_rsilab_call(tmp_path: Path) -> None:
    """The whole loop from a shell: prepare, edit, propose; the call returns the verdict."""
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    _baseline(lab)
    assert rsilab("campaign", "new", "synthetic", "--lab", lab).exit_code == 0
    workspace = tmp_path / "ws"
    workspace.mkdir()

    def call(tool: str, role: str, args: dict[str, Any]) -> dict[str, Any]:
        result = rsilab(
            "call", tool, "--role", role, "--campaign", "latest", "--workspace", workspace,
            "--args", json.dumps(args), "--lab", lab,
        )  # fmt: skip
        assert result.exit_code == 0, explain(result)
        value: dict[str, Any] = json.loads(result.stdout)
        return value

    assert call("prepare_workspace", "worker", {})["base_label"] == "H0/M0"
    config = json.loads((workspace / "config.json").read_text()) | ROBUST_BETTER
    (workspace / "config.json").write_text(json.dumps(config))
    direction = call("create_direction", "main", {"title": "t", "hypothesis": "h"})["id"]
    exp = call("create_experiment", "worker", {"direction_id": direction, "description": "d"})
    proposed = call("propose_candidate", "worker", {"experiment_id": exp["id"]})
    assert proposed["verdict"] == "accept"  # judged before the one-shot call returned
    assert _versions(lab)["versions"][-1]["label"] == "H1/M1"
