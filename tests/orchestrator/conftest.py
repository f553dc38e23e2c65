"""The Experiment OS benches serve the orchestrator's tests too; LLM tests share the scripted
server and the real OpenAI client on it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rsilab.agents.llm import ChatModel, OpenAIChat, RetryPolicy
from rsilab.agents.llm.scripted import ScriptedServer
from tests.expos.conftest import any_bench, bench, lab

__all__ = ["any_bench", "bench", "lab", "model", "server"]


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


@pytest.fixture
def model(server: ScriptedServer) -> Iterator[ChatModel]:
    """The real OpenAI client on the scripted server; retries do not wait."""
    retry = RetryPolicy(max_attempts=3, base_delay_s=0.0, sleep=lambda _s: None)
    with OpenAIChat(
        "gpt-test", api_key="k", base_url=server.openai_base_url, retry=retry, timeout_s=60
    ) as chat:
        yield chat
