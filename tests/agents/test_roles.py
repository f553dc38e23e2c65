"""Role texts: what they name, how they are stored as Orientations, and that agents run on those."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from rsilab.agents.llm import OpenAIChat, RetryPolicy
from rsilab.agents.llm.scripted import Reply, ScriptedServer
from rsilab.agents.loop import StopReason, run_agent_step
from rsilab.agents.roles import ROLES, ensure_role_orientations, latest_orientation
from rsilab.expos import CallContext, ExperimentOS, default_registry, open_campaign, policy
from rsilab.records import EventDraft, Orientation, Role, TaskRef
from rsilab.store import Lab


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    opened = Lab.init(tmp_path / "lab")
    yield opened
    opened.close()


@pytest.mark.parametrize("role", list(ROLES))
def test_each_role_text_names_only_tools_the_role_may_call(role: Role) -> None:
    names = set(default_registry().names())
    named = set(re.findall(r"\b[a-z]+(?:_[a-z]+)+\b", ROLES[role].text)) & names
    assert len(named) >= 5
    forbidden = {name for name in named if not policy.may_call(role, name)}
    assert not forbidden, f"{role} is told to use tools it may not call: {forbidden}"
    assert "budget_left" in ROLES[role].text  # every role is told how the footer works


def test_the_roles_cover_the_research_loop() -> None:
    assert set(ROLES) == {Role.MAIN, Role.WORKER, Role.REVIEWER, Role.LEADER}
    main, worker, reviewer = ROLES[Role.MAIN], ROLES[Role.WORKER], ROLES[Role.REVIEWER]
    assert "assign_orientation" in ROLES[Role.LEADER].text
    assert all(move in main.text for move in ("continue", "verify", "branch", "revise"))
    assert "propose_candidate" in worker.text and "run_job" in worker.text
    assert "submit_review" in reviewer.text and "flagged" in reviewer.text
    assert main.orientation_name == "role:main"


def test_ensure_role_orientations_seeds_once(lab: Lab) -> None:
    first = ensure_role_orientations(lab.store)
    head = lab.store.head()
    second = ensure_role_orientations(lab.store)

    assert set(first) == {"role:main", "role:worker", "role:reviewer", "role:leader"}
    assert lab.store.head() == head  # the second call wrote nothing
    assert {k: o.id for k, o in second.items()} == {k: o.id for k, o in first.items()}
    for definition in ROLES.values():
        stored = first[definition.orientation_name]
        assert (stored.version, stored.parent_id, stored.campaign_id) == (1, None, None)
        assert stored.text == definition.text
    seeding = lab.store.events(record_id=first["role:main"].id)
    assert [e.action for e in seeding] == ["orientations_seeded"]
    assert len(lab.store.query_as(Orientation)) == 4


def test_ensure_role_orientations_returns_the_latest_revision(lab: Lab) -> None:
    seeded = ensure_role_orientations(lab.store)["role:main"]
    revised = Orientation(
        name="role:main", version=2, text="Revised main text.", parent_id=seeded.id
    )
    lab.store.commit(EventDraft(actor="reviewer", role="human", action="revise"), [revised])

    latest = ensure_role_orientations(lab.store)
    assert latest["role:main"].id == revised.id
    assert latest["role:main"].text == "Revised main text."
    assert latest["role:worker"].version == 1
    assert latest_orientation(lab.store, "role:nobody") is None
    assert len(lab.store.query_as(Orientation)) == 5


def test_an_agent_runs_on_the_stored_text(lab: Lab, tmp_path: Path) -> None:
    seeded = ensure_role_orientations(lab.store)["role:main"]
    revised = Orientation(name="role:main", version=2, text="Be terse.", parent_id=seeded.id)
    lab.store.commit(EventDraft(actor="reviewer", role="human", action="revise"), [revised])
    campaign = open_campaign(lab.store, TaskRef(name="digits"))
    expos = ExperimentOS(lab.store, lab.artifacts, default_registry())
    ctx = CallContext(actor="main-1", role=Role.MAIN, campaign_id=campaign.id)

    with (
        ScriptedServer([Reply("Nothing to do yet.")]) as server,
        OpenAIChat(
            "gpt-4o-mini",
            api_key="k",
            base_url=server.openai_base_url,
            retry=RetryPolicy(max_attempts=1),
            timeout_s=5.0,
        ) as model,
    ):
        system = ensure_role_orientations(lab.store)["role:main"].text
        outcome = run_agent_step(model, expos, ctx, system=system, task_prompt="Plan.")

    assert outcome.stop == StopReason.DONE
    sent = server.requests[0].body["messages"]
    assert sent[0] == {"role": "system", "content": "Be terse."}
