"""Which chat model an agent uses: a spec string, the ``[llm]`` table of ``rsilab.toml``, the env.

A spec is ``builtin`` (no LLM: the built-in offline policy), ``openai:MODEL`` (OpenAI or any
compatible server) or ``anthropic:MODEL``; the model name may itself hold colons
(``openai:llama3:8b``). The lab's ``rsilab.toml`` may say more::

    [llm]
    provider = "openai"                 # or "anthropic", or "builtin"
    model = "Qwen/Qwen3-8B"
    base_url = "http://localhost:8000/v1"
    api_key_env = "VLLM_API_KEY"        # the variable that holds the key, never the key itself
    timeout_s = 300                     # per attempt
    max_retries = 3                     # retries after the first attempt, for transient failures
    price_in_per_mtok = 0.1             # USD per million tokens, for cost and budgets
    price_out_per_mtok = 0.4

Precedence: a spec names the provider and model, else the table does, else it is ``builtin``.
The table's other keys apply when its provider is the one chosen. ``base_url`` comes from the
table, else ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``; the key from ``api_key_env``, else
``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY``. An OpenAI-compatible server at a custom
``base_url`` may go without a key (local servers rarely check one) unless ``api_key_env`` is set.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING

from rsilab.agents.llm.base import ChatModel, RetryPolicy
from rsilab.agents.llm.pricing import Price, PriceTable, TokenBudget
from rsilab.controller.lab_settings import SETTINGS_FILE, settings_table
from rsilab.errors import UserError

if TYPE_CHECKING:
    from rsilab.agents.llm.anthropic_client import AnthropicChat
    from rsilab.agents.llm.openai_client import OpenAIChat

PROVIDERS = ("openai", "anthropic")
_SPEC_HINT = "write builtin, openai:MODEL or anthropic:MODEL (e.g. anthropic:claude-sonnet-4-5)"
_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
_URL_ENV = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}
# Sent to keyless OpenAI-compatible servers: the SDK refuses to start without some key.
_NO_KEY = "no-key"


@dataclass(frozen=True)
class LLMSettings:
    """The ``[llm]`` table; every key optional."""

    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    timeout_s: float = 300.0
    max_retries: int = 3
    price_in_per_mtok: float | None = None
    price_out_per_mtok: float | None = None


def parse_spec(spec: str) -> tuple[str, str] | None:
    """``(provider, model)`` of an agent spec, or None for ``builtin``.

    Raises:
        UserError: not ``builtin``, ``openai:MODEL`` or ``anthropic:MODEL``.
    """
    text = spec.strip()
    if text == "builtin":
        return None
    provider, _, model = text.partition(":")
    if provider not in PROVIDERS or not model.strip():
        raise UserError(f"agent spec {spec!r} is not understood", _SPEC_HINT)
    return provider, model.strip()


def llm_settings(lab_path: Path | None) -> LLMSettings:
    """The ``[llm]`` table of ``<lab_path>/rsilab.toml``; defaults without a lab or table.

    Raises:
        UserError: the file does not parse, a key is unknown, or a value has the wrong type.
    """
    table = settings_table(lab_path, "llm") if lab_path is not None else {}
    where = f"{Path(lab_path or '.') / SETTINGS_FILE} [llm]"
    known = {f.name: f for f in fields(LLMSettings)}
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise UserError(f"{where}: unknown key {unknown[0]!r}", f"the keys are {', '.join(known)}")
    for key, value in table.items():
        _check(where, key, value)
    if table.get("provider", "builtin") not in (*PROVIDERS, "builtin"):
        raise UserError(
            f"{where}: provider {table['provider']!r} is unknown",
            'write provider = "openai", "anthropic" or "builtin"',
        )
    return LLMSettings(**table)


def _check(where: str, key: str, value: object) -> None:
    if key in {"timeout_s", "price_in_per_mtok", "price_out_per_mtok"}:
        ok = isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
        kind = "a number >= 0"
    elif key == "max_retries":
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        kind = "a whole number >= 0"
    else:
        ok = isinstance(value, str) and bool(value.strip())
        kind = "a non-empty string"
    if not ok:
        raise UserError(f"{where}: {key} = {value!r} is not {kind}", f"set {key} to {kind}")


def resolve_chat_model(
    spec: str | None = None,
    *,
    lab_path: Path | None = None,
    env: Mapping[str, str] | None = None,
    budget: TokenBudget | None = None,
) -> ChatModel | None:
    """The chat model an agent spec and the lab's settings select; None means ``builtin``.

    Args:
        spec: ``builtin``, ``openai:MODEL`` or ``anthropic:MODEL``; None or "" defers to the
            ``[llm]`` table, and to ``builtin`` without one.
        lab_path: the lab folder whose ``rsilab.toml`` is read; None reads no file.
        env: the environment (default ``os.environ``).
        budget: charged by every call of the model.

    Raises:
        UserError: a malformed spec or table, or a missing API key (the hint names the variable).
    """
    settings = llm_settings(lab_path)
    env = os.environ if env is None else env
    chosen = _choose(spec, settings)
    if chosen is None:
        return None
    provider, model = chosen
    if settings.provider != provider:
        settings = LLMSettings()  # the table configures another provider
    base_url = settings.base_url or env.get(_URL_ENV[provider]) or None
    api_key = _api_key(provider, settings, base_url, env)
    return _client_class(provider)(
        model,
        api_key=api_key,
        base_url=base_url,
        timeout_s=float(settings.timeout_s),
        retry=RetryPolicy(max_attempts=settings.max_retries + 1),
        prices=_prices(model, settings),
        budget=budget,
    )


def _client_class(provider: str) -> type[OpenAIChat | AnthropicChat]:
    # Imported here: each SDK takes a second or more to import, and only one is needed.
    if provider == "openai":
        from rsilab.agents.llm.openai_client import OpenAIChat

        return OpenAIChat
    from rsilab.agents.llm.anthropic_client import AnthropicChat

    return AnthropicChat


def _choose(spec: str | None, settings: LLMSettings) -> tuple[str, str] | None:
    if spec and spec.strip():
        return parse_spec(spec)
    if settings.provider is None or settings.provider == "builtin":
        if settings.model is not None and settings.provider is None:
            raise UserError("[llm] names a model but no provider", 'add provider = "openai"')
        return None
    if settings.model is None:
        raise UserError(f"[llm] provider {settings.provider!r} has no model", 'add model = "..."')
    return parse_spec(f"{settings.provider}:{settings.model}")


def _api_key(
    provider: str, settings: LLMSettings, base_url: str | None, env: Mapping[str, str]
) -> str:
    name = settings.api_key_env or _KEY_ENV[provider]
    key = env.get(name, "").strip()
    if key:
        return key
    if provider == "openai" and base_url and settings.api_key_env is None:
        return _NO_KEY
    raise UserError(
        f"no API key for {provider}: the environment variable {name} is not set",
        f"export {name}=... (or choose the offline policy with builtin)",
    )


def _prices(model: str, settings: LLMSettings) -> PriceTable:
    given = (settings.price_in_per_mtok, settings.price_out_per_mtok)
    if given == (None, None):
        return PriceTable()
    if None in given:
        raise UserError(
            "[llm] sets only one of price_in_per_mtok and price_out_per_mtok",
            "set both, in USD per million tokens",
        )
    return PriceTable({model: Price(float(given[0] or 0), float(given[1] or 0))})
