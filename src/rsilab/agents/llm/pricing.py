"""Token usage, what it costs, and the budget it is charged to."""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import Field

from rsilab.agents.llm.errors import LLMBudgetExceeded
from rsilab.records import Model, Resources


class Usage(Model):
    """Tokens one call used, and their cost where the model's price is known."""

    tokens_in: int = Field(default=0, ge=0, description="Prompt tokens, cached ones included.")
    tokens_out: int = Field(default=0, ge=0, description="Completion tokens.")
    cost_usd: float | None = Field(default=None, description="USD, or None when not priced.")

    def to_resources(self) -> Resources:
        """The ledger's form; an unpriced call counts as 0 USD there."""
        return Resources(
            tokens_in=self.tokens_in, tokens_out=self.tokens_out, cost_usd=self.cost_usd or 0.0
        )


@dataclass(frozen=True)
class Price:
    """USD per million input and output tokens."""

    in_per_mtok: float
    out_per_mtok: float

    def __post_init__(self) -> None:
        if self.in_per_mtok < 0 or self.out_per_mtok < 0:
            raise ValueError("prices must be >= 0")


# List prices of a few well-known models (standard tier, no caching discounts), as published
# by the providers in 2025. Prices change and newer models are missing: a lab that cares sets
# price_in_per_mtok / price_out_per_mtok in rsilab.toml.
BUILTIN_PRICES: Mapping[str, Price] = {
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4o-mini": Price(0.15, 0.60),
    "gpt-4.1": Price(2.00, 8.00),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "o3": Price(2.00, 8.00),
    "o4-mini": Price(1.10, 4.40),
    "gpt-5": Price(1.25, 10.00),
    "gpt-5-mini": Price(0.25, 2.00),
    "gpt-5-nano": Price(0.05, 0.40),
    "gpt-5.1": Price(1.25, 10.00),
    "claude-opus-4": Price(15.00, 75.00),
    "claude-opus-4-1": Price(15.00, 75.00),
    "claude-opus-4-5": Price(5.00, 25.00),
    "claude-sonnet-4": Price(3.00, 15.00),
    "claude-sonnet-4-5": Price(3.00, 15.00),
    "claude-3-7-sonnet": Price(3.00, 15.00),
    "claude-haiku-4-5": Price(1.00, 5.00),
    "claude-3-5-haiku": Price(0.80, 4.00),
}

# Providers name snapshots by suffixing a date (gpt-4o-2024-08-06, claude-sonnet-4-20250514) or
# "-latest"; only such suffixes fall back to the base name, so an unknown variant stays unpriced
# rather than being charged another model's price.
_SNAPSHOT = re.compile(r"^(?P<base>.+?)-(?:\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


class PriceTable:
    """Prices by model name: the built-in table, overridden entry by entry.

    A name is looked up as given, then without a snapshot suffix (``-2024-08-06``,
    ``-20250514``, ``-latest``). Unknown models cost None.
    """

    def __init__(self, overrides: Mapping[str, Price] | None = None, *, builtin: bool = True):
        self._prices = {**(BUILTIN_PRICES if builtin else {}), **(overrides or {})}

    def lookup(self, model: str) -> Price | None:
        """The price of ``model``, or None when neither it nor its base name is known."""
        if model in self._prices:
            return self._prices[model]
        match = _SNAPSHOT.match(model)
        return self._prices.get(match.group("base")) if match else None

    def cost(self, model: str, usage: Usage, answered_model: str | None = None) -> float | None:
        """USD for ``usage`` at the price of ``model`` (or else ``answered_model``, the name the
        provider reported); None when neither is priced."""
        price = self.lookup(model) or (self.lookup(answered_model) if answered_model else None)
        if price is None:
            return None
        return (usage.tokens_in * price.in_per_mtok + usage.tokens_out * price.out_per_mtok) / 1e6


class TokenBudget:
    """A hard cap on the tokens (in + out) and, optionally, the USD of many calls.

    Thread-safe; one budget may be shared by every model of a campaign. A call whose price is
    unknown counts toward the token cap only (``unpriced_calls`` says how many there were).
    """

    def __init__(self, max_tokens: int, max_usd: float | None = None) -> None:
        if max_tokens < 0 or (max_usd is not None and max_usd < 0):
            raise ValueError("budget caps must be >= 0")
        self.max_tokens = max_tokens
        self.max_usd = max_usd
        self._lock = threading.Lock()
        self._tokens = 0
        self._usd = 0.0
        self._unpriced = 0

    @property
    def tokens_used(self) -> int:
        """Tokens charged so far."""
        with self._lock:
            return self._tokens

    @property
    def usd_used(self) -> float:
        """USD charged so far (priced calls only)."""
        with self._lock:
            return self._usd

    @property
    def unpriced_calls(self) -> int:
        """Calls charged without a known price."""
        with self._lock:
            return self._unpriced

    def check(self) -> None:
        """Refuse a new call once a cap is reached.

        Raises:
            LLMBudgetExceeded: tokens used >= ``max_tokens``, or USD used >= ``max_usd``.
        """
        with self._lock:
            reason = self._over(at_cap=True)
        if reason:
            raise LLMBudgetExceeded(f"LLM budget spent: {reason}")

    def charge(self, usage: Usage) -> None:
        """Add one call's usage; it is recorded even when it overspends.

        Raises:
            LLMBudgetExceeded: the total is now over a cap.
        """
        with self._lock:
            self._tokens += usage.tokens_in + usage.tokens_out
            if usage.cost_usd is None:
                self._unpriced += 1
            else:
                self._usd += usage.cost_usd
            reason = self._over(at_cap=False)
        if reason:
            raise LLMBudgetExceeded(f"LLM budget exceeded: {reason}")

    def _over(self, *, at_cap: bool) -> str:
        def past(used: float, cap: float) -> bool:
            return used >= cap if at_cap else used > cap

        if past(self._tokens, self.max_tokens):
            return f"{self._tokens} tokens of {self.max_tokens}"
        if self.max_usd is not None and past(self._usd, self.max_usd):
            return f"${self._usd:.4f} of ${self.max_usd:.4f}"
        return ""
