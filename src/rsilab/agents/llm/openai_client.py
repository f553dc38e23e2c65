"""Chat models behind the OpenAI chat-completions API: OpenAI itself and every compatible server
(vLLM, SGLang, Ollama, LM Studio, hosted open models), chosen by ``base_url``."""

from __future__ import annotations

from typing import Literal

import openai
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageParam,
)

from rsilab.agents.llm.base import ChatModel, ChatReply, Message, RetryPolicy, ToolCall, ToolSpec
from rsilab.agents.llm.errors import (
    LLMBadRequest,
    LLMError,
    LLMTimeout,
    LLMUnavailable,
    error_for_status,
)
from rsilab.agents.llm.pricing import PriceTable, TokenBudget, Usage

MaxTokensParam = Literal["max_tokens", "max_completion_tokens"]


class OpenAIChat(ChatModel):
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        model: the model name the endpoint knows (``gpt-4o``, ``Qwen/Qwen3-8B``, ``llama3:8b``).
        api_key: the key; local servers that need none accept any string.
        base_url: the endpoint, e.g. ``http://localhost:8000/v1``; None means OpenAI's own.
        timeout_s: seconds one attempt may take before it counts as timed out.
        max_tokens_param: which request field carries ``max_tokens``. OpenAI's newer models
            take only ``max_completion_tokens``, some compatible servers only ``max_tokens``;
            None picks the first for OpenAI's own endpoint and the second for any other.
        retry, prices, budget: see :class:`ChatModel`.
    """

    provider = "openai"

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str | None = None,
        timeout_s: float = 300.0,
        max_tokens_param: MaxTokensParam | None = None,
        retry: RetryPolicy | None = None,
        prices: PriceTable | None = None,
        budget: TokenBudget | None = None,
    ) -> None:
        super().__init__(model, retry=retry, prices=prices, budget=budget)
        # The SDK's own retries are off: ChatModel retries, the same way for every provider.
        self._client = openai.OpenAI(
            api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0
        )
        self.base_url = base_url
        self.timeout_s = timeout_s
        self._max_tokens_param: MaxTokensParam = max_tokens_param or (
            "max_completion_tokens" if base_url is None else "max_tokens"
        )

    @property
    def endpoint(self) -> str:
        return str(self._client.base_url)

    def _send(
        self, messages: list[Message], tools: list[ToolSpec], max_tokens: int | None
    ) -> ChatReply:
        limit: int | openai.Omit = openai.omit if max_tokens is None else max_tokens
        plain = self._max_tokens_param == "max_tokens"
        try:
            response = self._client.chat.completions.create(
                model=self.model,
                messages=[_to_openai(message) for message in messages],
                tools=[_tool(spec) for spec in tools] if tools else openai.omit,
                max_tokens=limit if plain else openai.omit,
                max_completion_tokens=openai.omit if plain else limit,
            )
        except openai.OpenAIError as exc:
            raise _translate(exc) from exc
        return _reply(response)

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()


def _to_openai(message: Message) -> ChatCompletionMessageParam:
    if message.role == "tool":
        assert message.tool_call_id is not None  # Message guarantees it for tool messages
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.role == "assistant":
        if not message.tool_calls:
            return {"role": "assistant", "content": message.content}
        return {
            "role": "assistant",
            # Some compatible servers refuse "" beside tool calls; null is the protocol's word.
            "content": message.content or None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in message.tool_calls
            ],
        }
    if message.role == "system":
        return {"role": "system", "content": message.content}
    return {"role": "user", "content": message.content}


def _tool(spec: ToolSpec) -> ChatCompletionFunctionToolParam:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        },
    }


def _reply(response: ChatCompletion) -> ChatReply:
    if not response.choices:
        raise LLMUnavailable("the endpoint answered with no choices")
    choice = response.choices[0]
    calls = [
        ToolCall(id=call.id, name=call.function.name, arguments=call.function.arguments)
        if isinstance(call, ChatCompletionMessageFunctionToolCall)
        else ToolCall(id=call.id, name=call.custom.name, arguments=call.custom.input)
        for call in choice.message.tool_calls or []
    ]
    usage = response.usage
    # Compatible servers sometimes leave finish_reason out; the calls say what it was.
    finish = str(choice.finish_reason or ("tool_calls" if calls else "stop"))
    return ChatReply(
        message=Message(
            role="assistant",
            content=choice.message.content or choice.message.refusal or "",
            tool_calls=calls,
        ),
        usage=Usage(
            tokens_in=usage.prompt_tokens if usage else 0,
            tokens_out=usage.completion_tokens if usage else 0,
        ),
        model=response.model or "",
        finish_reason="tool_calls" if finish == "function_call" else finish,
    )


def _translate(exc: openai.OpenAIError) -> LLMError:
    if isinstance(exc, openai.APITimeoutError):
        return LLMTimeout(f"OpenAI-compatible endpoint timed out: {exc}")
    if isinstance(exc, openai.APIConnectionError):
        return LLMUnavailable(f"OpenAI-compatible endpoint unreachable: {exc}")
    if isinstance(exc, openai.APIStatusError):
        message = f"OpenAI-compatible endpoint answered {exc.status_code}: {exc.message}"
        if exc.status_code == 429 and exc.code == "insufficient_quota":
            # Out of credit is no rate limit: waiting does not help.
            return LLMBadRequest(message, status=429)
        return error_for_status(exc.status_code, message, exc.response.headers)
    if isinstance(exc, openai.APIResponseValidationError):
        return LLMUnavailable(f"OpenAI-compatible endpoint sent an unusable answer: {exc}")
    return LLMError(f"OpenAI client failed: {exc}")
