"""LLM clients for rsilab's agents: one small interface, OpenAI-compatible and Anthropic SDKs.

:class:`ChatModel` is the interface (``complete(messages, tools) -> ChatReply``); it retries
transient failures with backoff, prices every call and charges a :class:`TokenBudget`.
:class:`OpenAIChat` covers OpenAI and every compatible server (vLLM, SGLang, Ollama, LM Studio),
:class:`AnthropicChat` the Messages API, and :func:`resolve_chat_model` picks one from an agent
spec (``builtin``, ``openai:MODEL``, ``anthropic:MODEL``) and ``rsilab.toml``.
:mod:`rsilab.agents.llm.scripted` holds a local server that speaks both protocols, for tests.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rsilab.agents.llm.base import (
    ChatModel,
    ChatReply,
    FailedAttempt,
    FailureHook,
    Message,
    RetryPolicy,
    ToolCall,
    ToolSpec,
)
from rsilab.agents.llm.config import LLMSettings, llm_settings, parse_spec, resolve_chat_model
from rsilab.agents.llm.errors import (
    LLMBadRequest,
    LLMBudgetExceeded,
    LLMError,
    LLMRateLimited,
    LLMTimeout,
    LLMUnavailable,
)
from rsilab.agents.llm.pricing import BUILTIN_PRICES, Price, PriceTable, TokenBudget, Usage

if TYPE_CHECKING:
    from rsilab.agents.llm.anthropic_client import AnthropicChat
    from rsilab.agents.llm.openai_client import OpenAIChat

# The SDKs take seconds to import; only code that builds a client should pay for them.
_LAZY = {
    "AnthropicChat": "rsilab.agents.llm.anthropic_client",
    "OpenAIChat": "rsilab.agents.llm.openai_client",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BUILTIN_PRICES",
    "AnthropicChat",
    "ChatModel",
    "ChatReply",
    "FailedAttempt",
    "FailureHook",
    "LLMBadRequest",
    "LLMBudgetExceeded",
    "LLMError",
    "LLMRateLimited",
    "LLMSettings",
    "LLMTimeout",
    "LLMUnavailable",
    "Message",
    "OpenAIChat",
    "Price",
    "PriceTable",
    "RetryPolicy",
    "TokenBudget",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "llm_settings",
    "parse_spec",
    "resolve_chat_model",
]
