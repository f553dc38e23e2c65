"""Chat models behind Anthropic's Messages API (or a server that speaks it, via ``base_url``)."""

from __future__ import annotations

import json

import anthropic
from anthropic.types import (
    ContentBlockParam,
    MessageParam,
    TextBlock,
    ToolParam,
    ToolUseBlock,
)
from anthropic.types import Message as AnthropicMessage

from rsilab.agents.llm.base import ChatModel, ChatReply, Message, RetryPolicy, ToolCall, ToolSpec
from rsilab.agents.llm.errors import LLMError, LLMTimeout, LLMUnavailable, error_for_status
from rsilab.agents.llm.pricing import PriceTable, TokenBudget, Usage

_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


class AnthropicChat(ChatModel):
    """A Claude model behind the Messages API.

    System messages become the request's ``system`` prompt (joined, in order); tool calls and
    results become ``tool_use`` and ``tool_result`` blocks, and turns of one role in a row are
    merged, as the API requires (all results of one assistant turn go in one user turn).

    Args:
        model: e.g. ``claude-sonnet-4-5``.
        api_key: the key.
        base_url: None for Anthropic's own endpoint.
        timeout_s: seconds one attempt may take before it counts as timed out.
        default_max_tokens: the output cap sent when ``complete`` gets none (the API needs one).
        retry, prices, budget: see :class:`ChatModel`.
    """

    provider = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str | None = None,
        timeout_s: float = 300.0,
        default_max_tokens: int = 8192,
        retry: RetryPolicy | None = None,
        prices: PriceTable | None = None,
        budget: TokenBudget | None = None,
    ) -> None:
        super().__init__(model, retry=retry, prices=prices, budget=budget)
        # The SDK's own retries are off: ChatModel retries, the same way for every provider.
        self._client = anthropic.Anthropic(
            api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0
        )
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.default_max_tokens = default_max_tokens

    @property
    def endpoint(self) -> str:
        return str(self._client.base_url)

    def _send(
        self, messages: list[Message], tools: list[ToolSpec], max_tokens: int | None
    ) -> ChatReply:
        system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
        try:
            response = self._client.messages.create(
                model=self.model,
                max_tokens=max_tokens or self.default_max_tokens,
                messages=_to_anthropic(messages),
                system=system or anthropic.omit,
                tools=[_tool(spec) for spec in tools] if tools else anthropic.omit,
            )
        except anthropic.AnthropicError as exc:
            raise _translate(exc) from exc
        return _reply(response)

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()


def _to_anthropic(messages: list[Message]) -> list[MessageParam]:
    turns: list[tuple[str, list[ContentBlockParam]]] = []
    for message in messages:
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        elif blocks:
            turns.append((role, blocks))
    return [
        {"role": "assistant", "content": blocks}
        if role == "assistant"
        else {"role": "user", "content": blocks}
        for role, blocks in turns
    ]


def _blocks(message: Message) -> list[ContentBlockParam]:
    if message.role == "tool":
        assert message.tool_call_id is not None  # Message guarantees it for tool messages
        return [
            {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": message.content,
                "is_error": message.is_error,
            }
        ]
    # The API refuses empty text blocks.
    blocks: list[ContentBlockParam] = (
        [{"type": "text", "text": message.content}] if message.content else []
    )
    for call in message.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": _input(call)})
    return blocks


def _input(call: ToolCall) -> dict[str, object]:
    try:
        value = json.loads(call.arguments)
    except json.JSONDecodeError:
        value = None
    # The API takes only an object here; a malformed call is echoed as {} and its tool result
    # (the error the loop sends back) says what was wrong with it.
    return value if isinstance(value, dict) else {}


def _tool(spec: ToolSpec) -> ToolParam:
    return {"name": spec.name, "description": spec.description, "input_schema": spec.parameters}


def _reply(response: AnthropicMessage) -> ChatReply:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in response.content:
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ToolUseBlock):
            calls.append(ToolCall(id=block.id, name=block.name, arguments=_arguments(block)))
    usage = response.usage
    tokens_in = (
        usage.input_tokens
        + (usage.cache_creation_input_tokens or 0)
        + (usage.cache_read_input_tokens or 0)
    )
    stop = response.stop_reason or ("tool_use" if calls else "end_turn")
    return ChatReply(
        message=Message(role="assistant", content="".join(texts), tool_calls=calls),
        usage=Usage(tokens_in=tokens_in, tokens_out=usage.output_tokens),
        model=str(response.model),
        finish_reason=_FINISH.get(stop, stop),
    )


def _arguments(block: ToolUseBlock) -> str:
    # The SDK does not validate answers, so a server may hand back a string where the protocol
    # says object; it is passed on raw, like OpenAI's malformed arguments, for the loop to judge.
    raw: object = block.input
    return raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)


def _translate(exc: anthropic.AnthropicError) -> LLMError:
    if isinstance(exc, anthropic.APITimeoutError):
        return LLMTimeout(f"Anthropic endpoint timed out: {exc}")
    if isinstance(exc, anthropic.APIConnectionError):
        return LLMUnavailable(f"Anthropic endpoint unreachable: {exc}")
    if isinstance(exc, anthropic.APIStatusError):
        message = f"Anthropic endpoint answered {exc.status_code}: {exc.api_message or exc}"
        return error_for_status(exc.status_code, message, exc.response.headers)
    if isinstance(exc, anthropic.APIResponseValidationError):
        return LLMUnavailable(f"Anthropic endpoint sent an unusable answer: {exc}")
    return LLMError(f"Anthropic client failed: {exc}")
