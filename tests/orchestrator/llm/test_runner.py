"""LLM campaigns end to end: the real SDK clients against the scripted server, on synthetic.

Each script plays Main, Worker and Reviewer in the order the runner calls them; ``Respond``
steps read the ids earlier tool results returned (directions, experiments, models, versions)
out of the request, as a real model would.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from rsilab.agents.llm import ChatModel
from rsilab.agents.llm.scripted import (
    RateLimited,
    RecordedRequest,
    Reply,
    Respond,
    ScriptedServer,
    Step,
    malformed_tool_call,
    tool_call,
)
from rsilab.errors import UserError
from rsilab.orchestrator.campaign import Progress
from rsilab.orchestrator.llm.runner import MAX_IDLE_ROUNDS, run_llm_campaign
from rsilab.orchestrator.research.dag import ResearchDag
from rsilab.orchestrator.research.guidance import give_guidance
from rsilab.records import (
    Campaign,
    Candidate,
    CandidateState,
    Event,
    Experiment,
    Guidance,
    Intent,
    Review,
    intent_id,
)
from rsilab.store import Lab, verify_store
from rsilab.tasks import Budget, get_task
from tests.synthetic_configs import BETTER

SPEC = "openai:gpt-test"
D1 = {"title": "slower adam", "hypothesis": "adam at a lower lr raises quality", "plan": "lr"}
D2 = {"title": "wider", "hypothesis": "a wider model raises quality", "plan": "width"}


@pytest.fixture(autouse=True)
def _process_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")


# -- reading requests, as a model would ----------------------------------------------------


def results(request: RecordedRequest, tool: str) -> list[dict[str, Any]]:
    """The successful results of ``tool`` in the conversation, oldest first."""
    values = [s.first_line_json() for s in request.tool_results() if s.name == tool]
    return [dict(v) for v in values if not v.get("error")]


def result(request: RecordedRequest, tool: str) -> dict[str, Any]:
    """The latest successful result of ``tool`` in the conversation."""
    found = results(request, tool)
    if not found:
        raise LookupError(f"no result of {tool} in the request")
    return found[-1]


def prompt(request: RecordedRequest) -> str:
    return request.user_texts()[-1]


def named(request: RecordedRequest, prefix: str) -> str:
    """The first ``<prefix>-<hex>`` id of the step's prompt."""
    match = re.search(rf"\b{prefix}-[0-9a-f]{{12}}\b", prompt(request))
    if match is None:
        raise LookupError(f"no {prefix} id in the prompt")
    return match.group(0)


def role(request: RecordedRequest) -> str:
    return request.system_text().split(" ")[3].lower().strip(",")  # "You are the Main agent"


def call(name: str, **arguments: Any) -> Reply:
    return tool_call(name, arguments)


# -- the scripts -----------------------------------------------------------------------------


def main_creating_directions() -> list[Step]:
    return [
        Reply(tool_calls=tool_call("create_direction", D1).tool_calls, tokens_in=300),
        RateLimited(0.0),
        malformed_tool_call("create_direction", '{"title": "broken"'),
        call("create_direction", **D2),
        Respond(lambda r: Reply("Work on {} first, then {}.".format(*ids(r, "create_direction")))),
    ]


def ids(request: RecordedRequest, tool: str) -> list[str]:
    return [str(v["id"]) for v in results(request, tool)]


def worker_proposing_a_gain(config: dict[str, Any] | None = None) -> list[Step]:
    """A Worker that writes ``config`` (default BETTER), runs it and proposes it."""
    config = BETTER if config is None else config
    exp = "create_experiment"
    return [
        Respond(lambda r: call("prepare_workspace", overwrite=True)),
        call("write_file", path="config.json", content=json.dumps(config)),
        Respond(
            lambda r: call(
                exp, direction_id=named(r, "dir"), description="the better config", config=config
            )
        ),
        Respond(lambda r: call("run_job", experiment_id=result(r, exp)["id"], kind="train")),
        Respond(
            lambda r: call(
                "run_job",
                experiment_id=result(r, exp)["id"],
                kind="dev_eval",
                model=result(r, "run_job")["model"],
            )
        ),
        Respond(
            lambda r: call(
                "finish_experiment",
                experiment_id=result(r, exp)["id"],
                status="succeeded",
                summary="adam at a lower lr",
            )
        ),
        Respond(
            lambda r: call(
                "propose_candidate",
                experiment_id=result(r, exp)["id"],
                base_version_id=result(r, "prepare_workspace")["base_version_id"],
            )
        ),
        Reply("Proposed the change."),
    ]


def reviewer_filing_one() -> list[Step]:
    return [
        Respond(
            lambda r: call(
                "submit_review",
                experiment_ids=[named(r, "exp")],
                direction_id=named(r, "dir"),
                verdict="inconclusive",
                recommendation="verify",
                rationale="One run on one seed; re-run it on fresh seeds.",
            )
        ),
        Reply("Filed one review."),
    ]


def llm_calls(lab: Lab, campaign_id: str) -> list[Event]:
    return [e for e in lab.store.events(campaign_id=campaign_id) if e.action == "llm_call"]


def step_intent(lab: Lab, campaign_id: str, key: str) -> Intent:
    return lab.store.get_as(intent_id(campaign_id, key), Intent)


# -- the tests -------------------------------------------------------------------------------


def test_an_llm_campaign_runs_end_to_end_through_the_openai_client(
    lab: Lab, server: ScriptedServer, model: ChatModel
) -> None:
    server.add(*main_creating_directions(), *worker_proposing_a_gain(), *reviewer_filing_one())
    said: list[Progress] = []
    outcome = run_llm_campaign(
        lab,
        get_task("synthetic"),
        agents=SPEC,
        budget=Budget(experiments=1, tokens=100_000),
        on_progress=said.append,
        model=model,
    )
    assert server.remaining == 0
    assert outcome.state == "finished" and outcome.experiments == 1, outcome.message
    assert outcome.message == "experiment budget spent"
    cid = outcome.campaign_id
    assert lab.store.get_as(cid, Campaign).settings["agents"] == SPEC

    dag = ResearchDag.load(lab.store, cid)
    first, second = dag.directions.values()
    assert (first.title, second.title) == (D1["title"], D2["title"])
    (exp,) = dag.experiments[first.id]
    assert exp.state == "succeeded" and exp.config == BETTER and exp.created_by == "worker-1"
    (review,) = lab.store.query_as(Review, campaign_id=cid)
    assert review.direction_id == first.id and review.experiment_ids == [exp.id]
    assert review.reviewer == "reviewer"
    (candidate,) = lab.store.query_as(Candidate, campaign_id=cid)
    assert candidate.experiment_id == exp.id
    assert candidate.state == CandidateState.ACCEPTED, candidate.reason
    assert [a.version_id for a in outcome.accepted] == [candidate.version_id]

    calls = llm_calls(lab, cid)
    assert len(calls) == len(server.requests) - 1  # the 429 was retried, not answered
    assert {(e.actor, e.role) for e in calls} == {
        ("main", "main"),
        ("worker-1", "worker"),
        ("reviewer", "reviewer"),
    }
    assert all(e.cost is not None and e.cost.tokens_out == 5 for e in calls)
    malformed = [
        e
        for e in lab.store.events(campaign_id=cid)
        if e.action == "tool_call" and e.outcome == "error" and e.actor == "main"
    ]
    assert len(malformed) == 1
    (bounced,) = [r for r in server.requests[3].tool_results() if r.name == "create_direction"][1:]
    assert bounced.first_line_json()["error"] == "invalid_arguments"  # went back to the model
    for key in ("step:1:main", "step:1:worker-1", "step:1:reviewer"):
        assert step_intent(lab, cid, key).state == "done"
    main_result = step_intent(lab, cid, "step:1:main").result
    assert main_result is not None and main_result["assignments"] == [first.id]
    worker_requests = [r for r in server.requests if role(r) == "worker"]
    assert first.id in prompt(worker_requests[0])
    assert '"experiments": 0' in worker_requests[-1].tool_results()[-1].content  # the footer
    assert (lab.path / "workspaces" / cid / "worker-1" / "config.json").is_file()
    assert {p.kind for p in said} >= {"agent", "experiment", "candidate", "campaign"}
    assert verify_store(lab.store, None).problems == []


def test_an_anthropic_campaign_configured_from_the_environment(
    lab: Lab, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    exp = "create_experiment"
    server.add(
        call("create_direction", **D1),
        Reply("Only one direction for now."),
        Respond(lambda r: call("prepare_workspace")),
        Respond(lambda r: call(exp, direction_id=named(r, "dir"), description="as it is")),
        Respond(lambda r: call("run_job", experiment_id=result(r, exp)["id"], kind="train")),
        Respond(
            lambda r: call(
                "finish_experiment", experiment_id=result(r, exp)["id"], status="succeeded"
            )
        ),
        Reply("Ran the control."),
        *reviewer_filing_one(),
    )
    outcome = run_llm_campaign(
        lab, get_task("synthetic"), agents="anthropic:claude-test", budget=Budget(experiments=1)
    )
    assert outcome.state == "finished" and outcome.experiments == 1, outcome.message
    assert {r.protocol for r in server.requests} == {"anthropic"}
    assert [role(r) for r in server.requests] == ["main"] * 2 + ["worker"] * 5 + ["reviewer"] * 2
    assert len(lab.store.query_as(Review, campaign_id=outcome.campaign_id)) == 1
    assert len(llm_calls(lab, outcome.campaign_id)) == 9
    assert verify_store(lab.store, None).problems == []


def test_the_token_budget_ends_the_campaign_cleanly(
    lab: Lab, server: ScriptedServer, model: ChatModel
) -> None:
    server.add(Reply(tool_calls=call("create_direction", **D1).tool_calls, tokens_in=5000))
    outcome = run_llm_campaign(
        lab, get_task("synthetic"), agents=SPEC, budget=Budget(tokens=1000), model=model
    )
    assert outcome.state == "finished" and "token budget spent" in outcome.message
    assert len(server.requests) == 1 and outcome.experiments == 0
    assert len(ResearchDag.load(lab.store, outcome.campaign_id).directions) == 1
    (spent,) = llm_calls(lab, outcome.campaign_id)
    assert spent.cost is not None and spent.cost.tokens_in == 5000
    assert verify_store(lab.store, None).problems == []


def test_an_llm_error_stops_and_a_resume_reads_guidance_without_repeating_steps(
    lab: Lab, server: ScriptedServer, model: ChatModel
) -> None:
    task = get_task("synthetic")
    server.add(
        call("create_direction", **D1),
        Respond(lambda r: Reply(f"Work on {result(r, 'create_direction')['id']}.")),
        call("prepare_workspace"),
        # the script ends here: the worker's next call gets a 400, which is not retried
    )
    stopped = run_llm_campaign(lab, task, agents=SPEC, budget=Budget(experiments=2), model=model)
    cid = stopped.campaign_id
    assert stopped.state == "stopped" and "LLM failed in worker-1's step" in stopped.message
    assert f"rsilab resume {cid}" in stopped.message
    assert step_intent(lab, cid, "step:1:worker-1").state == "pending"

    advice = "Stop this direction: the lr was already tuned."
    guidance = give_guidance(lab.store, cid, advice, "ada")
    seen: dict[str, RecordedRequest] = {}

    def close_it(request: RecordedRequest) -> Reply:
        seen["main"] = request
        return call("update_direction", direction_id=named(request, "dir"), status="exhausted")

    def first_resumed(request: RecordedRequest) -> Reply:
        seen["worker"] = request
        return Reply("Nothing worth running now.")

    done = len(server.requests)
    server.add(Respond(first_resumed), Respond(close_it), Reply("Closed it, as advised."))
    resumed = run_llm_campaign(
        lab, task, agents=SPEC, budget=Budget(experiments=2), campaign_id=cid, model=model
    )
    assert resumed.state == "finished", resumed.message
    assert resumed.message == "the Main agent left no open direction"
    assert role(server.requests[done]) == "worker"  # the done Main step was not repeated
    assert advice not in prompt(seen["worker"]) and advice in prompt(seen["main"])
    assert step_intent(lab, cid, "step:1:main").attempts == 1
    assert step_intent(lab, cid, "step:1:worker-1").attempts == 2
    planned = step_intent(lab, cid, "step:2:main").result
    assert planned is not None and planned["guidance_read"] == [guidance.id]
    read = lab.store.get_as(guidance.id, Guidance)
    assert read.read_by == "main" and read.read_at is not None
    assert lab.store.query_as(Experiment, campaign_id=cid) == []
    assert verify_store(lab.store, None).problems == []


def test_a_builtin_spec_or_a_missing_key_is_refused_before_anything_is_written(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    task, budget = get_task("synthetic"), Budget(experiments=1)
    with pytest.raises(UserError, match="built-in policy"):
        run_llm_campaign(lab, task, agents="builtin", budget=budget)
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        run_llm_campaign(lab, task, agents=SPEC, budget=budget)
    assert lab.store.query_as(Campaign) == []


def test_rounds_without_experiments_stop_the_campaign_for_guidance(
    lab: Lab, server: ScriptedServer, model: ChatModel
) -> None:
    server.add(call("create_direction", **D1))
    for _ in range(MAX_IDLE_ROUNDS):
        server.add(Reply("Keep going."), Reply("I ran nothing."))
    outcome = run_llm_campaign(
        lab, get_task("synthetic"), agents=SPEC, budget=Budget(), model=model
    )
    assert server.remaining == 0
    assert outcome.state == "stopped" and "rounds without a new experiment" in outcome.message
    assert f"rsilab guide {outcome.campaign_id}" in outcome.message
    assert [role(r) for r in server.requests] == ["main"] + ["main", "worker"] * MAX_IDLE_ROUNDS


def test_an_interrupt_stops_the_campaign_and_leaves_the_step_to_run_again(
    lab: Lab, server: ScriptedServer, model: ChatModel
) -> None:
    def interrupt(progress: Progress) -> None:
        if progress.kind == "agent":
            raise KeyboardInterrupt

    server.add(call("create_direction", **D1), Reply("Work on it."))
    outcome = run_llm_campaign(
        lab, get_task("synthetic"), agents=SPEC, budget=Budget(), on_progress=interrupt, model=model
    )
    assert outcome.state == "stopped" and "interrupted" in outcome.message
    assert lab.store.get_as(outcome.campaign_id, Campaign).state == "stopped"
    assert step_intent(lab, outcome.campaign_id, "step:1:main").state == "pending"
    assert verify_store(lab.store, None).problems == []


def play_two_workers(r: RecordedRequest) -> Reply:
    """Main opens D1 and D2; each Worker runs one experiment in its direction; the
    Reviewer files nothing. Answers by the conversation's state, so the order in which the
    two Workers' requests arrive does not matter."""
    who = role(r)
    if who == "main":
        made = ids(r, "create_direction")
        if len(made) < 2:
            return call("create_direction", **(D1 if not made else D2))
        return Reply("Work on {} and {}.".format(*made))
    if who != "worker":
        return Reply("Nothing to review.")
    done = {s.name for s in r.tool_results()}
    exp = "create_experiment"
    if "prepare_workspace" not in done:
        return call("prepare_workspace", overwrite=True)
    if exp not in done:
        return call(exp, direction_id=named(r, "dir"), description="as prepared", config={})
    trained = results(r, "run_job")
    if not trained:
        return call("run_job", experiment_id=result(r, exp)["id"], kind="train")
    if len(trained) == 1:
        model = trained[0]["model"]
        return call("run_job", experiment_id=result(r, exp)["id"], kind="dev_eval", model=model)
    if "finish_experiment" not in done:
        return call("finish_experiment", experiment_id=result(r, exp)["id"], status="succeeded")
    return Reply("One experiment done.")


def test_workers_of_a_round_run_at_once_each_in_its_own_direction(
    lab: Lab, server: ScriptedServer, model: ChatModel
) -> None:
    server.add(*[Respond(play_two_workers) for _ in range(40)])
    outcome = run_llm_campaign(
        lab,
        get_task("synthetic"),
        agents=SPEC,
        budget=Budget(experiments=2, tokens=100_000),
        workers=2,
        model=model,
    )
    assert outcome.state == "finished" and outcome.experiments == 2, outcome.message
    exps = lab.store.query_as(Experiment, campaign_id=outcome.campaign_id)
    assert sorted(e.created_by for e in exps) == ["worker-1", "worker-2"]
    assert len({e.direction_id for e in exps}) == 2
    assert all(e.state == "succeeded" for e in exps)
    assert verify_store(lab.store, None).problems == []
