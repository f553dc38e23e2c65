"""The scripted server's streaming Messages API and the requests that take no step, read by the
real Anthropic SDK (and by plain HTTP for the probes)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator

import anthropic
import pytest
from anthropic.types import ToolParam

from rsilab.agents.llm.scripted import (
    RateLimited,
    Reply,
    ScriptedServer,
    ScriptedToolCall,
    ServerError,
)

TOOL: ToolParam = {"name": "edit", "description": "edit a file", "input_schema": {"type": "object"}}
ARGUMENTS = {"path": "config.json", "text": "a long enough value to need several deltas"}


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


def sdk(server: ScriptedServer, retries: int = 0) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key="k", base_url=server.anthropic_base_url, max_retries=retries, timeout=10
    )


def test_a_streamed_reply_carries_text_and_tool_calls(server: ScriptedServer) -> None:
    text = "Let me edit the config, then run it."  # more than one delta
    server.add(
        Reply(
            text,
            tool_calls=(ScriptedToolCall("edit", ARGUMENTS, id="toolu_x"),),
            tokens_in=42,
            tokens_out=7,
        )
    )
    with sdk(server).messages.stream(
        model="m", max_tokens=100, messages=[{"role": "user", "content": "go"}], tools=[TOOL]
    ) as stream:
        events = [event.type for event in stream]
        message = stream.get_final_message()

    assert [b.type for b in message.content] == ["text", "tool_use"]
    assert message.content[0].text == text  # type: ignore[union-attr]
    call = message.content[1]
    assert (call.id, call.name, call.input) == ("toolu_x", "edit", ARGUMENTS)  # type: ignore[union-attr]
    assert message.stop_reason == "tool_use"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (42, 7)
    assert events[0] == "message_start" and events[-1] == "message_stop"
    assert events.count("content_block_start") == events.count("content_block_stop") == 2
    assert server.requests[0].body["stream"] is True


def test_a_streamed_text_reply_ends_the_turn(server: ScriptedServer) -> None:
    server.add(Reply("done"))
    with sdk(server).messages.stream(
        model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        message = stream.get_final_message()
    assert [(b.type, b.text) for b in message.content] == [("text", "done")]  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn"


def test_fault_steps_answer_a_streaming_request_before_it_streams(server: ScriptedServer) -> None:
    server.add(RateLimited(0.0), Reply("after the wait"), ServerError(529, "overloaded"))
    client = sdk(server, retries=1)
    with client.messages.stream(
        model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        assert stream.get_final_text() == "after the wait"
    with (
        pytest.raises(anthropic.APIStatusError) as raised,
        sdk(server).messages.stream(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        ) as stream,
    ):
        stream.get_final_message()
    assert raised.value.status_code == 529
    assert len(server.requests) == 3 and server.remaining == 0


def test_token_counts_and_probes_take_no_step(server: ScriptedServer) -> None:
    server.add(Reply("the only step"))
    counted = sdk(server).messages.count_tokens(
        model="m", messages=[{"role": "user", "content": "x" * 400}]
    )
    assert counted.input_tokens >= 100  # a token per 4 bytes of the request, at least
    with urllib.request.urlopen(f"{server.base_url}/v1/models", timeout=10) as answer:
        assert (answer.status, json.loads(answer.read())) == (200, {})
    head = urllib.request.Request(server.base_url, method="HEAD")
    with urllib.request.urlopen(head, timeout=10) as answer:
        assert answer.status == 200
    assert server.other_requests == [
        ("POST", "/v1/messages/count_tokens"),
        ("GET", "/v1/models"),
        ("HEAD", "/"),
    ]
    assert server.remaining == 1 and server.requests == []
