"""prepare_workspace, propose_candidate and candidate_status against a real controller."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rsilab.executors.local import LocalExecutor
from rsilab.expos import CallContext, ExperimentOS, default_registry, open_campaign
from rsilab.expos.services import LabServices
from rsilab.records import Campaign, Candidate, ProtocolFlag, Role, SystemVersion
from rsilab.sandbox.select import default_sandbox
from rsilab.store import Lab
from rsilab.tasks import get_task
from tests.synthetic_configs import BETTER


class Door:
    """An Experiment OS with services over a lab whose synthetic lineage has a baseline."""

    def __init__(self, lab: Lab, services: LabServices, campaign: Campaign, root: Path) -> None:
        self.lab, self.services, self.campaign, self.root = lab, services, campaign, root
        self.expos = ExperimentOS(lab.store, lab.artifacts, default_registry(), services)
        self.workspace = root / "ws"
        self.workspace.mkdir()

    def call(
        self, tool: str, role: Role = Role.WORKER, campaign: str | None = None, **args: Any
    ) -> Any:
        ctx = CallContext(f"{role}-1", role, campaign or self.campaign.id, self.workspace)
        return self.expos.call(ctx, tool, args)

    def ok(self, tool: str, role: Role = Role.WORKER, **args: Any) -> dict[str, Any]:
        result = self.call(tool, role, **args)
        assert result.ok, result.to_dict()
        return result.value

    def experiment(self) -> str:
        direction = self.ok("create_direction", Role.MAIN, title="cfg", hypothesis="h")["id"]
        return self.ok("create_experiment", direction_id=direction, description="d")["id"]

    def wait(self, candidate_id: str) -> dict[str, Any]:
        for _ in range(300):
            status = self.ok("candidate_status", candidate_id=candidate_id)
            if status["decided"]:
                return status
            time.sleep(0.1)
        raise AssertionError("the candidate was never decided")


@pytest.fixture
def door(tmp_path: Path) -> Iterator[Door]:
    lab = Lab.init(tmp_path / "lab")
    executor = LocalExecutor(default_sandbox(), lab.artifacts, slots=2)
    services = LabServices(lab, executor)
    campaign = open_campaign(lab.store, get_task("synthetic").ref())
    yield Door(lab, services, campaign, tmp_path)
    services.close()
    executor.shutdown()
    lab.close()


def test_without_services_or_baseline_the_tools_say_what_is_missing(door: Door) -> None:
    bare = ExperimentOS(door.lab.store, door.lab.artifacts, default_registry())
    ctx = CallContext("w", Role.WORKER, door.campaign.id, door.workspace)
    assert bare.call(ctx, "prepare_workspace", {}).error.code == "unavailable"  # type: ignore[union-attr]
    missing = door.call("prepare_workspace")
    assert (
        missing.error.code == "unavailable" and "rsilab baseline synthetic" in missing.error.message
    )


def test_prepare_propose_and_a_bare_verdict(door: Door) -> None:
    door.services.controller(get_task("synthetic")).baseline()
    prepared = door.ok("prepare_workspace")
    assert prepared["base_label"] == "H0/M0" and prepared["dev_scores_returned"] is True
    assert "harness.toml" in prepared["files"] and "data-in/train.jsonl" in prepared["files"]
    assert not any(f.endswith(("accept.jsonl", "final.jsonl")) for f in prepared["files"])
    refused = door.call("prepare_workspace")
    assert refused.error.code == "conflict" and refused.error.field == "overwrite"

    config = json.loads((door.workspace / "config.json").read_text()) | BETTER
    (door.workspace / "config.json").write_text(json.dumps(config))
    exp = door.experiment()
    proposed = door.ok(
        "propose_candidate", experiment_id=exp, base_version_id=prepared["base_version_id"]
    )
    status = door.wait(proposed["candidate_id"])
    assert status["verdict"] == "accept" and status["label"] == "H1/M1"
    # no number of any kind reaches the agent
    assert set(status) == {"candidate_id", "verdict", "decided", "outcome", "version_id", "label"}
    # the snapshot left the Experiment OS's folders out
    candidate = door.lab.store.get_as(proposed["candidate_id"], Candidate)
    paths = {e["path"] for e in door.lab.artifacts.manifest(candidate.harness_sha256)}
    assert "config.json" in paths and not any(p.startswith("data-in") for p in paths)
    again = door.ok("prepare_workspace", overwrite=True)
    assert again["base_label"] == "H1/M1"


def test_candidates_and_versions_are_not_agent_readable(door: Door) -> None:
    version = door.services.controller(get_task("synthetic")).baseline()
    door.ok("prepare_workspace")
    proposed = door.ok("propose_candidate", experiment_id=door.experiment())
    door.wait(proposed["candidate_id"])
    for record_id in (proposed["candidate_id"], version.id):
        result = door.call("get_lineage", record_id=record_id)
        assert result.error is not None and result.error.code == "guard_refused"
    found = door.ok("search_records", text="synthetic")["records"]
    kinds = {item["kind"] for item in found}
    assert "campaign" in kinds and not kinds & {"candidate", "version", "lineage"}
    other = open_campaign(door.lab.store, get_task("synthetic").ref())
    foreign = door.call(
        "candidate_status", campaign=other.id, candidate_id=proposed["candidate_id"]
    )
    assert foreign.error.code == "not_found"
    assert door.lab.store.query_as(ProtocolFlag)  # the refused reads were flagged


def test_a_workspace_that_is_not_a_harness_is_refused(door: Door) -> None:
    door.services.controller(get_task("synthetic")).baseline()
    (door.workspace / "notes.txt").write_text("no harness here")
    result = door.call("propose_candidate", experiment_id=door.experiment())
    assert result.error.code == "invalid_candidate" and "harness.toml" in result.error.message
    assert not door.lab.store.query_as(Candidate)
    assert len(door.lab.store.query_as(SystemVersion)) == 1


def test_the_recorded_config_must_match_the_workspace(door: Door) -> None:
    """An experiment's config is what the records say it ran: proposing a workspace whose
    config.json says otherwise is refused with a flag; an empty or matching record passes."""
    door.services.controller(get_task("synthetic")).baseline()
    door.ok("prepare_workspace")
    current = json.loads((door.workspace / "config.json").read_text())
    direction = door.ok("create_direction", Role.MAIN, title="cfg", hypothesis="h")["id"]

    def experiment(config: dict[str, Any]) -> str:
        made = door.ok("create_experiment", direction_id=direction, description="d", config=config)
        return str(made["id"])

    claimed = experiment(current | {"lr": 0.5, "extra_knob": 1})
    refused = door.call("propose_candidate", experiment_id=claimed)
    assert refused.error.code == "guard_refused" and refused.error.field == "experiment_id"
    assert "lr: recorded 0.5, workspace" in refused.error.message
    assert "extra_knob: recorded 1, workspace has no such key" in refused.error.message
    assert [(f.stage, f.rule) for f in door.lab.store.query_as(ProtocolFlag)] == [
        ("reporting", "config_mismatch")
    ]
    assert not door.lab.store.query_as(Candidate)
    (door.workspace / "config.json").unlink()
    gone = door.call("propose_candidate", experiment_id=experiment({"lr": 0.5}))
    assert gone.error.code == "guard_refused" and "not a JSON object" in gone.error.message
    (door.workspace / "config.json").write_text(json.dumps(current))
    for config in ({}, current, {"lr": current["lr"]}):  # nothing claimed, all, a true part
        door.ok("propose_candidate", experiment_id=experiment(config))
