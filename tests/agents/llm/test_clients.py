"""The LLM clients through the real SDKs against the scripted local server, both protocols."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rsilab.agents.llm import (
    AnthropicChat,
    ChatModel,
    LLMBadRequest,
    LLMBudgetExceeded,
    LLMRateLimited,
    LLMUnavailable,
    Message,
    OpenAIChat,
    Price,
    PriceTable,
    RetryPolicy,
    TokenBudget,
    ToolCall,
    ToolSpec,
    Usage,
    llm_settings,
    parse_spec,
    resolve_chat_model,
)
from rsilab.agents.llm.scripted import (
    RateLimited,
    Reply,
    ScriptedServer,
    ServerError,
    Stall,
    Step,
    malformed_tool_call,
    tool_call,
)
from rsilab.errors import UserError

MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-haiku-4-5"}
PRICES = {"openai": Price(0.15, 0.60), "anthropic": Price(1.00, 5.00)}
READ = ToolSpec(
    name="read_file",
    description="Read a file of the workspace.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)
CHAT = [Message(role="system", content="Be brief."), Message(role="user", content="Hi")]

MakeModel = Callable[..., ChatModel]


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


@pytest.fixture(params=["openai", "anthropic"])
def provider(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make(provider: str, server: ScriptedServer) -> Iterator[MakeModel]:
    """Builds a client of the parametrized provider, pointed at the server; closes it after."""
    made: list[ChatModel] = []

    def build(*steps: Step, **options: Any) -> ChatModel:
        server.add(*steps)
        options.setdefault("retry", RetryPolicy(base_delay_s=0.001, max_delay_s=0.5))
        options.setdefault("timeout_s", 5.0)
        model: ChatModel
        if provider == "openai":
            model = OpenAIChat(
                MODELS[provider], api_key="test-key", base_url=server.openai_base_url, **options
            )
        else:
            model = AnthropicChat(
                MODELS[provider], api_key="test-key", base_url=server.anthropic_base_url, **options
            )
        made.append(model)
        return model

    yield build
    for model in made:
        model.close()


def test_plain_reply(make: MakeModel, server: ScriptedServer, provider: str) -> None:
    model = make(Reply("Hello.", tokens_in=1000, tokens_out=200))
    reply = model.complete(CHAT, max_tokens=64)

    assert reply.message == Message(role="assistant", content="Hello.")
    assert reply.finish_reason == "stop"
    assert reply.model == MODELS[provider]
    assert model.name == f"{provider}:{MODELS[provider]}"
    price = PRICES[provider]
    cost = (1000 * price.in_per_mtok + 200 * price.out_per_mtok) / 1e6
    assert (reply.usage.tokens_in, reply.usage.tokens_out) == (1000, 200)
    assert reply.usage.cost_usd == pytest.approx(cost)
    body = server.requests[0].body
    assert "tools" not in body
    if provider == "openai":
        assert body["messages"] == [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
        ]
        assert body["max_tokens"] == 64  # a custom base_url gets the widely supported field
    else:
        assert body["system"] == "Be brief."
        assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
        assert body["max_tokens"] == 64


def test_tool_call_round_trip(make: MakeModel, server: ScriptedServer, provider: str) -> None:
    model = make(tool_call("read_file", {"path": "a.txt"}), Reply("It says hello."))
    first = model.complete(CHAT, [READ])
    assert first.finish_reason == "tool_calls"
    [call] = first.message.tool_calls
    assert call.name == "read_file"
    assert call.parsed_arguments() == {"path": "a.txt"}

    result = Message(role="tool", tool_call_id=call.id, content="hello")
    second = model.complete([*CHAT, first.message, result], [READ])
    assert second.message.content == "It says hello."

    body = server.requests[1].body
    if provider == "openai":
        function = {
            "name": READ.name,
            "description": READ.description,
            "parameters": READ.parameters,
        }
        assert body["tools"] == [{"type": "function", "function": function}]
        assert body["messages"][-2:] == [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": "read_file", "arguments": call.arguments},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call.id, "content": "hello"},
        ]
    else:
        assert body["tools"] == [
            {"name": READ.name, "description": READ.description, "input_schema": READ.parameters}
        ]
        assert body["messages"][-2:] == [
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": call.id,
                        "name": "read_file",
                        "input": {"path": "a.txt"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": call.id,
                        "content": "hello",
                        "is_error": False,
                    }
                ],
            },
        ]


def test_malformed_tool_call_comes_back_raw(
    make: MakeModel, server: ScriptedServer, provider: str
) -> None:
    model = make(malformed_tool_call("read_file", '{"path": "a.txt"'), Reply("Sorry."))
    first = model.complete(CHAT, [READ])
    [call] = first.message.tool_calls
    assert call.arguments == '{"path": "a.txt"'
    with pytest.raises(ValueError, match="not valid JSON"):
        call.parsed_arguments()

    error = Message(role="tool", tool_call_id=call.id, content="bad arguments", is_error=True)
    assert model.complete([*CHAT, first.message, error]).message.content == "Sorry."
    sent = server.requests[1].body["messages"]
    if provider == "openai":
        assert sent[-2]["tool_calls"][0]["function"]["arguments"] == '{"path": "a.txt"'
    else:
        assert sent[-2]["content"][0]["input"] == {}  # the API takes only an object there
        assert sent[-1]["content"][0]["is_error"] is True


def test_rate_limit_is_retried_after_the_wait_asked(
    make: MakeModel, server: ScriptedServer
) -> None:
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        time.sleep(seconds)

    retry = RetryPolicy(base_delay_s=0.001, sleep=sleep)
    model = make(RateLimited(retry_after_s=0.05), Reply("ok"), retry=retry)
    assert model.complete(CHAT).message.content == "ok"
    assert len(server.requests) == 2
    assert waits and 0.05 <= waits[0] <= 0.06


def test_timeout_is_retried(make: MakeModel, server: ScriptedServer) -> None:
    model = make(Stall(5.0), Reply("ok"), timeout_s=0.2)
    started = time.monotonic()
    assert model.complete(CHAT).message.content == "ok"
    assert time.monotonic() - started < 3.0
    assert len(server.requests) == 2


def test_persistent_server_error_gives_up(make: MakeModel, server: ScriptedServer) -> None:
    retry = RetryPolicy(max_attempts=3, base_delay_s=0.001)
    model = make(*[ServerError(503)] * 3, Reply("never"), retry=retry)
    with pytest.raises(LLMUnavailable) as caught:
        model.complete(CHAT)
    assert caught.value.attempts == 3
    assert caught.value.status == 503
    assert len(server.requests) == 3


def test_rate_limit_that_persists_is_raised(make: MakeModel) -> None:
    model = make(*[RateLimited()] * 2, retry=RetryPolicy(max_attempts=2, base_delay_s=0.001))
    with pytest.raises(LLMRateLimited):
        model.complete(CHAT)


def test_bad_request_is_not_retried(make: MakeModel, server: ScriptedServer) -> None:
    model = make(ServerError(400, "unknown field"), Reply("never"))
    with pytest.raises(LLMBadRequest, match="400") as caught:
        model.complete(CHAT)
    assert caught.value.attempts == 1
    assert len(server.requests) == 1


def test_budget_stops_calls(make: MakeModel, server: ScriptedServer) -> None:
    budget = TokenBudget(max_tokens=20)
    model = make(*[Reply("a", tokens_in=10, tokens_out=5)] * 3, budget=budget)
    model.complete(CHAT)
    with pytest.raises(LLMBudgetExceeded) as caught:
        model.complete(CHAT)  # 30 tokens of 20: the reply is kept on the error
    assert caught.value.reply is not None
    assert caught.value.reply.usage.tokens_in == 10
    assert budget.tokens_used == 30
    with pytest.raises(LLMBudgetExceeded, match="spent"):
        model.complete(CHAT)
    assert len(server.requests) == 2  # the third call never went out


def test_usd_budget(make: MakeModel, provider: str) -> None:
    budget = TokenBudget(max_tokens=10**9, max_usd=0.5)
    model = make(Reply("a", tokens_in=1_000_000, tokens_out=0), budget=budget)
    cost = PRICES[provider].in_per_mtok
    if cost > 0.5:
        with pytest.raises(LLMBudgetExceeded, match=r"\$"):
            model.complete(CHAT)
    else:
        model.complete(CHAT)
    assert budget.usd_used == pytest.approx(cost)


def test_empty_script_fails_fast(make: MakeModel) -> None:
    with pytest.raises(LLMBadRequest, match="no step left"):
        make().complete(CHAT)


def test_anthropic_merges_turns_of_one_role(server: ScriptedServer) -> None:
    server.add(Reply("done"))
    assistant = Message(
        role="assistant",
        content="Reading both.",
        tool_calls=[
            ToolCall(id="t1", name="read_file", arguments='{"path": "a"}'),
            ToolCall(id="t2", name="read_file", arguments='{"path": "b"}'),
        ],
    )
    history = [
        *CHAT,
        assistant,
        Message(role="tool", tool_call_id="t1", content="A"),
        Message(role="tool", tool_call_id="t2", content="B"),
        Message(role="user", content="Now compare."),
    ]
    with AnthropicChat("claude-haiku-4-5", api_key="k", base_url=server.base_url) as model:
        model.complete(history)
    sent = server.requests[0].body["messages"]
    assert [turn["role"] for turn in sent] == ["user", "assistant", "user"]
    assert [block["type"] for block in sent[1]["content"]] == ["text", "tool_use", "tool_use"]
    assert [block.get("tool_use_id") for block in sent[2]["content"]] == ["t1", "t2", None]


# ---- pricing and budgets -------------------------------------------------------------------


def test_price_table() -> None:
    table = PriceTable({"my-model": Price(1.0, 2.0)})
    assert table.lookup("gpt-4o-2024-08-06") == table.lookup("gpt-4o")
    assert table.lookup("gpt-4o-mini") == Price(0.15, 0.60)  # not gpt-4o's price
    assert table.lookup("claude-haiku-4-5-20251001") == Price(1.00, 5.00)
    assert table.lookup("gpt-4o-audio-preview") is None  # a variant is not its base model
    assert table.lookup("llama3:8b") is None
    usage = Usage(tokens_in=500_000, tokens_out=250_000)
    assert table.cost("my-model", usage) == pytest.approx(1.0)
    assert table.cost("unknown", usage) is None
    assert table.cost("alias", usage, answered_model="my-model") == pytest.approx(1.0)
    assert PriceTable(builtin=False).lookup("gpt-4o") is None


def test_budget_is_thread_safe() -> None:
    budget = TokenBudget(max_tokens=10**9, max_usd=10**9)
    usage = Usage(tokens_in=2, tokens_out=1, cost_usd=0.5)

    def spend() -> None:
        for _ in range(500):
            budget.charge(usage)

    threads = [threading.Thread(target=spend) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert budget.tokens_used == 8 * 500 * 3
    assert budget.usd_used == pytest.approx(8 * 500 * 0.5)
    budget.charge(Usage(tokens_in=1))
    assert budget.unpriced_calls == 1


def test_retry_delays_grow_and_stay_capped() -> None:
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=5.0)
    for attempt, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (6, 5.0)]:
        assert ceiling / 2 <= policy.delay_s(attempt, None) <= ceiling
    assert policy.delay_s(1, retry_after_s=3.0) == 3.0
    assert policy.delay_s(1, retry_after_s=100.0) == 5.0


def test_messages_check_their_role() -> None:
    with pytest.raises(ValueError, match="tool_call_id"):
        Message(role="tool", content="x")
    with pytest.raises(ValueError, match="tool_calls"):
        Message.model_validate(
            {"role": "user", "tool_calls": [{"id": "1", "name": "f", "arguments": "{}"}]}
        )


# ---- configuration --------------------------------------------------------------------------


def _write_llm(lab: Path, text: str) -> Path:
    (lab / "rsilab.toml").write_text(text, "utf-8")
    return lab


def test_spec_strings() -> None:
    assert parse_spec("builtin") is None
    assert parse_spec("openai:gpt-4o") == ("openai", "gpt-4o")
    assert parse_spec("openai:llama3:8b") == ("openai", "llama3:8b")
    assert parse_spec("anthropic:claude-haiku-4-5") == ("anthropic", "claude-haiku-4-5")
    for bad in ("gpt-4o", "openai:", "google:gemini", ""):
        with pytest.raises(UserError, match="not understood") as caught:
            parse_spec(bad)
        assert "openai:MODEL" in caught.value.hint


def test_resolve_from_env(tmp_path: Path) -> None:
    assert resolve_chat_model("builtin", env={}) is None
    assert resolve_chat_model(None, lab_path=tmp_path, env={}) is None

    env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}
    model = resolve_chat_model("openai:gpt-4o", env=env)
    assert isinstance(model, OpenAIChat)
    with model:
        assert model.name == "openai:gpt-4o"
        assert model.base_url == "http://127.0.0.1:1/v1"
        assert model.retry.max_attempts == 4

    budget = TokenBudget(max_tokens=100)
    claude = resolve_chat_model(
        "anthropic:claude-haiku-4-5", env={"ANTHROPIC_API_KEY": "k"}, budget=budget
    )
    assert isinstance(claude, AnthropicChat)
    with claude:
        assert claude.budget is budget
        assert claude.base_url is None


def test_missing_key_is_a_user_error() -> None:
    with pytest.raises(UserError, match="ANTHROPIC_API_KEY") as caught:
        resolve_chat_model("anthropic:claude-haiku-4-5", env={})
    assert "export ANTHROPIC_API_KEY" in caught.value.hint
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        resolve_chat_model("openai:gpt-4o", env={})


def test_resolve_from_rsilab_toml(tmp_path: Path) -> None:
    lab = _write_llm(
        tmp_path,
        '[lab]\ngc_keep_top = 2\n\n[llm]\nprovider = "openai"\nmodel = "Qwen/Qwen3-8B"\n'
        'base_url = "http://127.0.0.1:8000/v1"\napi_key_env = "VLLM_KEY"\ntimeout_s = 30\n'
        "max_retries = 1\nprice_in_per_mtok = 0.1\nprice_out_per_mtok = 0.4\n",
    )
    env = {"VLLM_KEY": "v", "OPENAI_BASE_URL": "http://ignored/v1"}
    model = resolve_chat_model(None, lab_path=lab, env=env)
    assert isinstance(model, OpenAIChat)
    with model:
        assert model.model == "Qwen/Qwen3-8B"
        assert model.base_url == "http://127.0.0.1:8000/v1"  # the lab's file wins over the env
        assert model.timeout_s == 30.0
        assert model.retry.max_attempts == 2
        assert model.prices.lookup("Qwen/Qwen3-8B") == Price(0.1, 0.4)

    # A spec overrides the model; the table still configures its own provider...
    other = resolve_chat_model("openai:other", lab_path=lab, env=env)
    assert isinstance(other, OpenAIChat)
    with other:
        assert other.base_url == "http://127.0.0.1:8000/v1"
    # ...and not another one.
    claude = resolve_chat_model(
        "anthropic:claude-haiku-4-5", lab_path=lab, env={"ANTHROPIC_API_KEY": "k"}
    )
    assert isinstance(claude, AnthropicChat)
    with claude:
        assert claude.base_url is None and claude.timeout_s == 300.0
    # The named key variable must be set, even for a local server.
    with pytest.raises(UserError, match="VLLM_KEY"):
        resolve_chat_model(None, lab_path=lab, env={})


def test_keyless_local_server(tmp_path: Path) -> None:
    lab = _write_llm(
        tmp_path,
        '[llm]\nprovider = "openai"\nmodel = "llama3:8b"\nbase_url = "http://127.0.0.1:11434/v1"\n',
    )
    model = resolve_chat_model(None, lab_path=lab, env={})
    assert isinstance(model, OpenAIChat)
    model.close()


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('provider = "openai"\nmodle = "x"', "unknown key 'modle'"),
        ('provider = "openai"', "has no model"),
        ('model = "gpt-4o"', "no provider"),
        ('provider = "gemini"\nmodel = "x"', "provider 'gemini' is unknown"),
        ('provider = "openai"\nmodel = "x"\ntimeout_s = "fast"', "not a number"),
        ('provider = "openai"\nmodel = "x"\nprice_in_per_mtok = 1.0', "only one of"),
    ],
)
def test_bad_llm_table(tmp_path: Path, table: str, message: str) -> None:
    lab = _write_llm(tmp_path, f"[llm]\n{table}\n")
    with pytest.raises(UserError, match=message):
        resolve_chat_model(None, lab_path=lab, env={"OPENAI_API_KEY": "k"})


def test_llm_settings_defaults_and_bad_toml(tmp_path: Path) -> None:
    assert llm_settings(None).provider is None
    assert llm_settings(tmp_path).max_retries == 3
    _write_llm(tmp_path, "[llm\n")
    with pytest.raises(UserError, match=r"rsilab\.toml"):
        llm_settings(tmp_path)


def test_sdks_load_only_when_a_client_is_built() -> None:
    # Each SDK takes a second or more to import; the CLI and the offline policy should not pay.
    code = (
        "import sys, rsilab.agents.llm as llm\n"
        "assert not {'openai', 'anthropic'} & set(sys.modules)\n"
        "llm.OpenAIChat\n"
        "assert 'openai' in sys.modules and 'anthropic' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
