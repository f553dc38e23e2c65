"""Research team tools: the Leader assigns orientations; nobody else may; everyone may look."""

from __future__ import annotations

from pathlib import Path

import pytest

from rsilab.agents.roles import ensure_team_orientations
from rsilab.expos import ExperimentOS, default_registry, open_campaign
from rsilab.memory import revise_orientation
from rsilab.records import Assignment, Finding, Role, TaskRef
from rsilab.store import Lab
from tests.expos.helpers import Bench


@pytest.fixture
def team(lab: Lab, tmp_path: Path) -> Bench:
    """A bench whose campaign is a team of two, with the built-in orientations seeded."""
    campaign = open_campaign(lab.store, TaskRef(name="digits"), settings={"team": 2})
    ensure_team_orientations(lab.store)
    expos = ExperimentOS(lab.store, lab.artifacts, default_registry())
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return Bench(expos, lab.store, lab.artifacts, campaign, workspace)


def _assign(researcher: str = "researcher-1", orientation: str = "explorer") -> dict[str, object]:
    return {"researcher": researcher, "orientation": orientation, "reason": "the space is wide"}


def test_the_leader_assigns_and_redirects_with_reasons(team: Bench) -> None:
    exp = team.experiment(team.direction())
    leader = team.ctx(Role.LEADER, actor="leader")
    first = team.ok(leader, "assign_orientation", {**_assign(), "evidence_ids": [exp]})
    assert first["orientation"] == "explorer" and first["supersedes"] is None
    stored = team.store.get_as(first["id"], Assignment)
    assert stored.campaign_id == team.campaign.id and stored.evidence == [exp]
    assert stored.leader == "leader" and stored.orientation_id.startswith("ori-")
    again = team.fail(leader, "assign_orientation", _assign(), code="conflict")
    assert "already" in again.message
    second = team.ok(leader, "assign_orientation", _assign(orientation="orientation:verifier"))
    assert (second["orientation"], second["supersedes"]) == ("verifier", first["id"])
    listed = team.ok(Role.WORKER, "list_assignments")
    assert listed["team"] == ["researcher-1", "researcher-2"]
    assert [(a["orientation"], a["current"]) for a in listed["assignments"]] == [
        ("explorer", False),
        ("verifier", True),
    ]


def test_a_new_version_of_the_same_orientation_may_be_assigned(team: Bench) -> None:
    leader = team.ctx(Role.LEADER, actor="leader")
    first = team.ok(leader, "assign_orientation", _assign())
    revised = revise_orientation(
        team.store, "orientation:explorer", "Explore wider still.", actor="t", role=Role.HUMAN
    )
    second = team.ok(leader, "assign_orientation", _assign())
    assert second["orientation_version"] == 2 and second["supersedes"] == first["id"]
    assert team.store.get_as(second["id"], Assignment).orientation_id == revised.id


def test_only_the_leader_or_a_person_assigns(team: Bench) -> None:
    for role in (Role.WORKER, Role.MAIN, Role.REVIEWER):
        team.fail(role, "assign_orientation", _assign(), code="permission_denied")
    team.ok(Role.HUMAN, "assign_orientation", _assign())
    assert len(team.store.query_as(Assignment)) == 1


def test_unknown_researchers_orientations_and_evidence_are_refused(team: Bench) -> None:
    leader = team.ctx(Role.LEADER, actor="leader")
    refused = team.fail(
        leader, "assign_orientation", _assign("researcher-3"), code="invalid_arguments"
    )
    assert refused.field == "researcher" and "researcher-2" in (refused.expected or "")
    missing = team.fail(
        leader, "assign_orientation", _assign(orientation="oracle"), code="not_found"
    )
    assert "explorer" in (missing.expected or "")
    team.fail(
        leader,
        "assign_orientation",
        {**_assign(), "evidence_ids": ["exp-000000000000"]},
        code="not_found",
    )
    team.fail(leader, "assign_orientation", {**_assign(), "reason": " "}, code="invalid_arguments")
    assert team.store.query_as(Assignment) == []


def test_a_campaign_without_a_team_has_no_researchers(bench: Bench) -> None:
    ensure_team_orientations(bench.store)
    leader = bench.ctx(Role.LEADER, actor="leader")
    refused = bench.fail(leader, "assign_orientation", _assign(), code="invalid_arguments")
    assert "not a team campaign" in refused.message


def test_a_researchers_finding_names_its_orientation(team: Bench) -> None:
    team.ok(
        team.ctx(Role.LEADER, actor="leader"), "assign_orientation", _assign(orientation="analyst")
    )
    analyst = team.ctx(Role.REVIEWER, actor="researcher-1")
    made = team.ok(analyst, "publish_finding", {"claim": "lr matters", "status": "unresolved"})
    assert team.store.get_as(made["id"], Finding).orientation == "orientation:analyst"
    other = team.ctx(Role.REVIEWER, actor="researcher-2")
    made = team.ok(other, "publish_finding", {"claim": "width matters", "status": "unresolved"})
    assert team.store.get_as(made["id"], Finding).orientation == "role:reviewer"
