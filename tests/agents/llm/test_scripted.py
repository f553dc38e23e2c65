"""Respond steps of the scripted server: replies computed from the request, both protocols."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rsilab.agents.llm import (
    AnthropicChat,
    ChatModel,
    LLMBadRequest,
    Message,
    OpenAIChat,
    RetryPolicy,
    ToolCall,
    ToolSpec,
)
from rsilab.agents.llm.scripted import (
    Answer,
    RateLimited,
    RecordedRequest,
    Reply,
    Respond,
    ScriptedServer,
    tool_call,
)

READ = ToolSpec(name="read_file", parameters={"type": "object", "properties": {}})
CONVERSATION = [
    Message(role="system", content="Be brief."),
    Message(role="user", content="Read a.txt"),
    Message(
        role="assistant",
        tool_calls=[ToolCall(id="c1", name="read_file", arguments='{"path": "a.txt"}')],
    ),
    Message(role="tool", tool_call_id="c1", content='{"text": "hello"}\n{"budget_left": {}}'),
]


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


def client(server: ScriptedServer, provider: str) -> ChatModel:
    retry = RetryPolicy(max_attempts=2, base_delay_s=0.0, sleep=lambda _s: None)
    if provider == "openai":
        return OpenAIChat("m", api_key="k", base_url=server.openai_base_url, retry=retry)
    return AnthropicChat("m", api_key="k", base_url=server.anthropic_base_url, retry=retry)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_respond_reads_the_conversation_whichever_protocol(
    server: ScriptedServer, provider: str
) -> None:
    seen: list[RecordedRequest] = []

    def answer(request: RecordedRequest) -> Reply:
        seen.append(request)
        result = request.tool_results()[-1]
        text = result.first_line_json()["text"]
        return Reply(f"{result.name}({result.arguments_json()['path']}) said {text}")

    server.add(Respond(answer))
    with client(server, provider) as model:
        reply = model.complete(CONVERSATION, [READ])
    assert reply.message.content == "read_file(a.txt) said hello"
    request = seen[0]
    assert request.protocol == provider
    assert request.system_text() == "Be brief."
    assert request.user_texts() == ["Read a.txt"]
    assert request.tool_names() == ["read_file"]


def test_respond_may_answer_with_any_step(server: ScriptedServer) -> None:
    calls: Iterator[Answer] = iter([RateLimited(0.0), tool_call("read_file", {"path": "b"})])
    server.add(Respond(lambda _r: next(calls)), Respond(lambda _r: next(calls)))
    with client(server, "openai") as model:
        reply = model.complete(CONVERSATION, [READ])
    assert reply.message.tool_calls[0].parsed_arguments() == {"path": "b"}
    assert len(server.requests) == 2  # the 429, then its retry


def test_a_respond_function_that_raises_fails_the_request_fast(server: ScriptedServer) -> None:
    def broken(_request: RecordedRequest) -> Reply:
        raise LookupError("no such id in the conversation")

    server.add(Respond(broken))
    with client(server, "anthropic") as model, pytest.raises(LLMBadRequest) as caught:
        model.complete(CONVERSATION, [READ])
    assert "LookupError: no such id" in str(caught.value)
    assert len(server.requests) == 1
