"""LLM research teams end to end: the real OpenAI client against the scripted server.

One responder plays every agent, reading who it is from the request as a model would: the
Leader (its system text) orients the researchers its prompt names; each researcher (named in
its prompt) runs one experiment in its own line of work and publishes what it saw; the
Reviewer has nothing to add.
"""

from __future__ import annotations

import re

import pytest

from rsilab.agents.llm import ChatModel
from rsilab.agents.llm.scripted import RecordedRequest, Reply, Respond, ScriptedServer
from rsilab.errors import UserError
from rsilab.memory import current_assignments
from rsilab.orchestrator.llm.team import run_llm_team_campaign
from rsilab.orchestrator.research.campaign_review import campaign_review_of
from rsilab.records import Assignment, Campaign, Direction, Experiment, Finding
from rsilab.store import Lab, verify_store
from rsilab.tasks import Budget, get_task
from tests.orchestrator.llm.test_runner import call, named, prompt, result

ORIENT = {"researcher-1": "explorer", "researcher-2": "exploiter"}


@pytest.fixture(autouse=True)
def _process_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")


def play_team(r: RecordedRequest) -> Reply:
    """Every agent of the team, by who the request is for."""
    done = [s.name for s in r.tool_results()]
    if r.system_text().startswith("You are the Leader"):
        asked = re.search(r"Give each of (.+?) an orientation", prompt(r))
        todo = asked.group(1).split(", ") if asked else []
        given = done.count("assign_orientation")
        if given < len(todo):
            name = todo[given]
            reason = "start of the campaign: cover new ground and refine what works"
            return call(
                "assign_orientation", researcher=name, orientation=ORIENT[name], reason=reason
            )
        return Reply("Oriented the team." if todo else "No change: the records call for none.")
    who = re.match(r"You are (researcher-\d+)", prompt(r))
    if who is None:  # the Reviewer
        return Reply("Nothing to add this round.")
    exp = "create_experiment"
    if "prepare_workspace" not in done:
        return call("prepare_workspace", overwrite=True)
    if exp not in done:
        return call(exp, direction_id=named(r, "dir"), description="the control", config={})
    trained = [s for s in done if s == "run_job"]
    if not trained:
        return call("run_job", experiment_id=result(r, exp)["id"], kind="train")
    if len(trained) == 1:
        model = result(r, "run_job")["model"]
        return call("run_job", experiment_id=result(r, exp)["id"], kind="dev_eval", model=model)
    if "finish_experiment" not in done:
        return call("finish_experiment", experiment_id=result(r, exp)["id"], status="succeeded")
    if "publish_finding" not in done:
        return call(
            "publish_finding",
            claim=f"{who.group(1)} ran the accepted system as its control",
            status="unresolved",
            sources=[result(r, exp)["id"]],
        )
    return Reply("One experiment done and its note published.")


def test_a_leader_orients_llm_researchers_who_share_memory(
    lab: Lab, server: ScriptedServer, model: ChatModel
) -> None:
    server.add(*[Respond(play_team) for _ in range(60)])
    outcome = run_llm_team_campaign(
        lab,
        get_task("synthetic"),
        agents="openai:gpt-test",
        team=2,
        budget=Budget(experiments=2, tokens=200_000),
        model=model,
    )
    cid = outcome.campaign_id
    assert outcome.state == "finished" and outcome.experiments == 2, outcome.message
    assert lab.store.get_as(cid, Campaign).settings["team"] == 2
    oriented = current_assignments(lab.store, cid)
    assert {n: a.orientation for n, a in oriented.items()} == ORIENT
    assert all(a.leader == "leader" for a in lab.store.query_as(Assignment, campaign_id=cid))
    exps = lab.store.query_as(Experiment, campaign_id=cid)
    assert sorted(e.created_by for e in exps) == sorted(ORIENT)
    lines = {d.created_by: d for d in lab.store.query_as(Direction, campaign_id=cid)}
    for e in exps:  # each in its own line of work
        assert lines[e.created_by].id == e.direction_id
        assert lines[e.created_by].title == f"{e.created_by}: line of work"
    published = lab.store.query_as(Finding, fields={"origin_campaign_id": cid})
    assert sorted(f.author for f in published) == sorted(ORIENT)
    asked = [r for r in server.requests if re.match(r"You are researcher-1", prompt(r))]
    assert asked and "oriented as explorer" in prompt(asked[0])  # its orientation's text
    assert "builtin:verify-gain v1" in prompt(asked[0])  # and the lab's skills
    review = campaign_review_of(lab.store, cid)
    assert review is not None
    assert {o.orientation: o.experiments for o in review.orientations} == {
        "explorer": 1,
        "exploiter": 1,
    }
    assert verify_store(lab.store, None).problems == []


def test_an_llm_team_without_its_key_is_refused_before_anything_is_written(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    head = lab.store.head()
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        run_llm_team_campaign(
            lab, get_task("synthetic"), agents="openai:m", team=2, budget=Budget(experiments=2)
        )
    with pytest.raises(UserError, match="at least one researcher"):
        run_llm_team_campaign(
            lab, get_task("synthetic"), agents="openai:m", team=0, budget=Budget(experiments=2)
        )
    assert lab.store.head() == head
