"""The agent loop through the real SDK clients, the scripted server and a real Experiment OS."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rsilab.agents.llm import (
    AnthropicChat,
    ChatModel,
    OpenAIChat,
    RetryPolicy,
    TokenBudget,
)
from rsilab.agents.llm.scripted import (
    RecordedRequest,
    Reply,
    ScriptedServer,
    ServerError,
    Step,
    malformed_tool_call,
    tool_call,
)
from rsilab.agents.loop import (
    FOOTER_KEY,
    StepBudget,
    StepOutcome,
    StopReason,
    ToolCallRecord,
    run_agent_step,
    tool_specs,
)
from rsilab.expos import ExperimentOS, default_registry, open_campaign
from rsilab.records import Direction, Event, ProtocolFlag, Role, TaskRef
from rsilab.store import Lab
from tests.expos.helpers import Bench

MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-haiku-4-5"}
DIRECTION = {"title": "wider model", "hypothesis": "a wider hidden layer helps"}
SYSTEM = "You are the Main agent."
TASK = "Grow the DAG."

Make = Callable[..., ChatModel]


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[Bench]:
    """An ExperimentOS over a SQLite lab, with one campaign and a workspace."""
    lab = Lab.init(tmp_path / "lab")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    campaign = open_campaign(lab.store, TaskRef(name="digits"))
    expos = ExperimentOS(lab.store, lab.artifacts, default_registry())
    yield Bench(expos, lab.store, lab.artifacts, campaign, workspace)
    lab.close()


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


@pytest.fixture
def make(server: ScriptedServer) -> Iterator[Make]:
    """Builds a client of ``provider`` pointed at the server, its script set; closes it after."""
    made: list[ChatModel] = []

    def build(*steps: Step, provider: str = "openai", budget: TokenBudget | None = None) -> Any:
        server.add(*steps)
        retry = RetryPolicy(max_attempts=1)
        model: ChatModel
        if provider == "openai":
            model = OpenAIChat(
                MODELS[provider],
                api_key="k",
                base_url=server.openai_base_url,
                retry=retry,
                budget=budget,
                timeout_s=5.0,
            )
        else:
            model = AnthropicChat(
                MODELS[provider],
                api_key="k",
                base_url=server.anthropic_base_url,
                retry=retry,
                budget=budget,
                timeout_s=5.0,
            )
        made.append(model)
        return model

    yield build
    for model in made:
        model.close()


def step(model: ChatModel, bench: Bench, role: Role = Role.MAIN, **options: Any) -> StepOutcome:
    return run_agent_step(
        model, bench.expos, bench.ctx(role), system=SYSTEM, task_prompt=TASK, **options
    )


def tool_results(request: RecordedRequest) -> list[str]:
    """The tool-result texts a request carried, whichever protocol it spoke."""
    out: list[str] = []
    for message in request.body["messages"]:
        if request.protocol == "openai":
            if message["role"] == "tool":
                out.append(message["content"])
        elif isinstance(message["content"], list):
            out += [b["content"] for b in message["content"] if b["type"] == "tool_result"]
    return out


def split(result: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A tool result as (the tool's JSON payload, the footer)."""
    payload, footer = result.rsplit("\n", 1)
    return json.loads(payload), json.loads(footer)


def events(bench: Bench, action: str) -> list[Event]:
    return [e for e in bench.store.events(campaign_id=bench.campaign.id) if e.action == action]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_main_step_creates_a_direction_and_records_its_calls(
    make: Make, bench: Bench, server: ScriptedServer, provider: str
) -> None:
    model = make(
        tool_call("create_direction", DIRECTION),
        Reply("Created one direction.", tokens_in=200, tokens_out=40),
        provider=provider,
    )
    outcome = step(model, bench)

    assert outcome.stop == StopReason.DONE
    assert outcome.final_text == "Created one direction."
    assert outcome.turns == 2
    [record] = outcome.tool_calls
    assert (record.name, record.ok, record.error) == ("create_direction", True, None)
    [direction] = bench.store.query_as(Direction, campaign_id=bench.campaign.id)
    assert direction.title == "wider model"
    assert (outcome.tokens_in, outcome.tokens_out) == (210, 45)
    assert outcome.cost_usd > 0

    # The model was offered exactly the main role's tools, with the registry's schemas.
    first = server.requests[0].body
    offered = {t["function"]["name"] if "function" in t else t["name"] for t in first["tools"]}
    assert offered == {t.name for t in bench.expos.tools_for(Role.MAIN)}
    assert "create_experiment" not in offered
    payload, footer = split(tool_results(server.requests[1])[0])
    assert payload["id"] == direction.id
    assert footer[FOOTER_KEY]["turns"] == 29 and "wrap_up" not in footer

    calls = events(bench, "llm_call")
    assert len(calls) == 2
    for event in calls:
        assert (event.actor, event.role) == ("main-1", "main")
        assert event.detail.startswith(f"{provider}:{MODELS[provider]}")
        assert event.cost is not None and event.cost.cost_usd > 0
    assert calls[1].cost is not None
    assert (calls[1].cost.tokens_in, calls[1].cost.tokens_out) == (200, 40)
    assert "stop" in calls[1].detail and "tool_calls" in calls[0].detail
    assert outcome.history[-1].content == "Created one direction."
    bench.assert_verifies()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_malformed_arguments_come_back_as_an_error_the_model_can_fix(
    make: Make, bench: Bench, server: ScriptedServer, provider: str
) -> None:
    model = make(
        malformed_tool_call("create_direction", '{"title": "wider model"'),
        tool_call("create_direction", DIRECTION),
        Reply("Fixed it."),
        provider=provider,
    )
    outcome = step(model, bench)

    assert outcome.stop == StopReason.DONE
    assert [(c.name, c.ok, c.error) for c in outcome.tool_calls] == [
        ("create_direction", False, "invalid_arguments"),
        ("create_direction", True, None),
    ]
    error, footer = split(tool_results(server.requests[1])[0])
    assert error["error"] == "invalid_arguments"
    assert "not valid JSON" in error["message"]
    assert "not valid JSON" in error["detail"]  # with where the text broke off
    assert FOOTER_KEY in footer
    assert len(bench.store.query_as(Direction)) == 1
    assert all(c.seq is not None for c in outcome.tool_calls)  # both calls are in the ledger


def test_an_unknown_tool_name_gets_a_suggestion(
    make: Make, bench: Bench, server: ScriptedServer
) -> None:
    model = make(tool_call("create_directon", DIRECTION), Reply("Oops."))
    outcome = step(model, bench)

    assert outcome.stop == StopReason.DONE
    assert outcome.tool_calls == (
        ToolCallRecord("create_directon", False, "unknown_tool", outcome.tool_calls[0].seq),
    )
    error, _ = split(tool_results(server.requests[1])[0])
    assert error["error"] == "unknown_tool"
    assert "create_direction" in error["message"]
    assert server.requests[1].body["messages"][-1]["role"] == "tool"


def test_a_forbidden_tool_is_refused_flagged_and_reported(
    make: Make, bench: Bench, server: ScriptedServer
) -> None:
    direction_id = bench.direction()
    model = make(
        tool_call("create_experiment", {"direction_id": direction_id, "description": "x"}),
        Reply("I may not run experiments."),
    )
    outcome = step(model, bench, Role.MAIN)

    assert outcome.tool_calls[0].error == "permission_denied"
    error, _ = split(tool_results(server.requests[1])[0])
    assert error["error"] == "permission_denied"
    [flag] = bench.store.query_as(ProtocolFlag)
    assert (flag.rule, flag.actor, flag.tool) == (
        "tool_not_allowed_for_role",
        "main-1",
        "create_experiment",
    )


def test_worker_runs_record_tools(make: Make, bench: Bench, server: ScriptedServer) -> None:
    direction_id = bench.direction()
    model = make(
        tool_call("create_experiment", {"direction_id": direction_id, "description": "wider"}),
        Reply("Opened it."),
    )
    outcome = step(model, bench, Role.WORKER, budget=StepBudget(experiments=lambda: (2, 5)))
    assert outcome.tool_calls[0].ok
    _, footer = split(tool_results(server.requests[1])[0])
    assert footer[FOOTER_KEY]["experiments"] == 2
    offered = {t.name for t in tool_specs(bench.expos, Role.WORKER)}
    assert {"run_job", "log_metric", "propose_candidate"} <= offered
    assert "create_direction" not in offered


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_footer_warns_when_tokens_run_low(make: Make, bench: Bench, server: ScriptedServer) -> None:
    model = make(
        Reply(tool_calls=tool_call("list_directions").tool_calls, tokens_in=60, tokens_out=31),
        Reply("Wrapping up."),
    )
    outcome = step(model, bench, budget=StepBudget(tokens=100))
    assert outcome.stop == StopReason.DONE
    _, footer = split(tool_results(server.requests[1])[0])
    assert footer[FOOTER_KEY]["tokens"] == 9
    assert "tokens" in footer["wrap_up"] and "record your state" in footer["wrap_up"].lower()


def tick_on_tool_calls(
    monkeypatch: pytest.MonkeyPatch, bench: Bench, clock: FakeClock, seconds: float
) -> None:
    """Make every tool call take ``seconds`` of the fake clock's time."""
    dispatch = bench.expos.call

    def slow_call(*args: Any, **kwargs: Any) -> Any:
        clock.now += seconds
        return dispatch(*args, **kwargs)

    monkeypatch.setattr(bench.expos, "call", slow_call)


def test_footer_warns_when_time_runs_low(
    make: Make, bench: Bench, server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    tick_on_tool_calls(monkeypatch, bench, clock, 45.0)
    model = make(tool_call("list_directions"), tool_call("list_directions"), Reply("Done."))
    outcome = step(model, bench, budget=StepBudget(wall_s=100.0, clock=clock))

    assert outcome.stop == StopReason.DONE
    _, early = split(tool_results(server.requests[1])[0])
    _, late = split(tool_results(server.requests[2])[-1])
    assert early[FOOTER_KEY]["wall_s"] == 55.0 and "wrap_up" not in early
    assert late[FOOTER_KEY]["wall_s"] == 10.0 and "wall_s" in late["wrap_up"]


def test_wall_time_spent_ends_the_step_between_turns(
    make: Make, bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    tick_on_tool_calls(monkeypatch, bench, clock, 120.0)
    model = make(tool_call("list_directions"))
    outcome = step(model, bench, budget=StepBudget(wall_s=60.0, clock=clock))

    assert outcome.stop == StopReason.WALL_TIME
    assert outcome.turns == 1 and outcome.tool_calls[0].ok
    assert outcome.history[-1].role == "tool"  # consistent: a later step may continue from it


def test_budget_exceeded_ends_the_step_and_the_overspent_call_is_recorded(
    make: Make, bench: Bench, server: ScriptedServer
) -> None:
    budget = TokenBudget(max_tokens=20)
    model = make(tool_call("list_directions"), Reply("Last words."), budget=budget)
    outcome = step(model, bench)

    assert outcome.stop == StopReason.BUDGET
    assert "budget" in outcome.detail
    assert outcome.turns == 2 and outcome.tokens == 30
    assert outcome.final_text == "Last words."
    assert len(events(bench, "llm_call")) == 2

    # Spent before the call: refused up front, nothing sent, nothing recorded.
    again = step(model, bench, history=outcome.history)
    assert again.stop == StopReason.BUDGET
    assert (again.turns, again.tokens) == (0, 0)
    assert len(server.requests) == 2


def test_step_token_cap_and_turn_limit(make: Make, bench: Bench, server: ScriptedServer) -> None:
    model = make(tool_call("list_directions"), tool_call("list_directions"))
    capped = step(model, bench, budget=StepBudget(tokens=15))
    assert (capped.stop, capped.turns) == (StopReason.BUDGET, 1)

    _, footer = split(capped.history[-1].content)
    assert footer[FOOTER_KEY]["tokens"] == 0 and "tokens" in footer["wrap_up"]

    turns = step(model, bench, max_turns=1)
    assert (turns.stop, turns.turns) == (StopReason.MAX_TURNS, 1)
    _, footer = split(turns.history[-1].content)
    assert footer[FOOTER_KEY]["turns"] == 0 and "turns" in footer["wrap_up"]
    assert len(server.requests) == 2


def test_llm_failure_ends_the_step_cleanly(make: Make, bench: Bench) -> None:
    model = make(ServerError(503))
    outcome = step(model, bench)
    assert outcome.stop == StopReason.LLM_ERROR
    assert "503" in outcome.detail
    assert [m.role for m in outcome.history] == ["user"]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_long_history_is_compacted_into_a_recorded_summary(
    make: Make, bench: Bench, server: ScriptedServer, provider: str
) -> None:
    long = {**DIRECTION, "plan": "step " * 400}  # ~2,000 characters of arguments
    model = make(
        tool_call("create_direction", long),
        Reply("I created direction 'wider model' and will wait for reviews."),
        Reply("Done."),
        provider=provider,
    )
    outcome = step(model, bench, compact_at_tokens=300)

    assert outcome.stop == StopReason.DONE
    assert outcome.turns == 2  # the summary call is not a turn
    [summary] = events(bench, "agent_summary")
    assert summary.detail == "I created direction 'wider model' and will wait for reviews."
    assert (summary.actor, summary.role) == ("main-1", "main")
    calls = events(bench, "llm_call")
    assert [e.detail.rsplit("; ", 1)[1] for e in calls] == ["turn", "summary", "turn"]

    asked = server.requests[1].body["messages"][-1]
    asked_text = asked["content"] if provider == "openai" else asked["content"][-1]["text"]
    assert "Summarise your progress" in asked_text
    # The turn after it sees the summary and the task again, not the long call.
    after = json.dumps(server.requests[2].body["messages"])
    assert "step step" not in after and "wait for reviews" in after and TASK in after
    assert outcome.history[0].role == "user"
    assert outcome.history[0].content.startswith("Summary of your earlier work")
    assert outcome.history[-1].content == "Done."
