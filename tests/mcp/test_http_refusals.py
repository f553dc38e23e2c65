"""The refusal limiter: one event per source a minute, ten a minute in all, the rest counted."""

from __future__ import annotations

import pytest

from rsilab.mcp import _http_refusals
from rsilab.mcp._http_refusals import RefusalLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_flood_from_one_source_is_recorded_once_a_minute() -> None:
    clock = Clock()
    limiter = RefusalLimiter(clock=clock)
    admitted = []
    for _ in range(200):
        admitted.append(limiter.admit("10.0.0.2"))
        clock.now += 0.1  # 200 requests in 20 seconds
    assert admitted[0] == 0
    assert admitted[1:] == [None] * 199
    clock.now = 1000.0 + 60.0  # a minute after the first event
    assert limiter.admit("10.0.0.2") == 199  # the next event names the ones only counted
    assert limiter.admit("10.0.0.2") is None
    assert limiter.unreported() == {"10.0.0.2": 1}
    assert limiter.unreported() == {}  # reported once


def test_sources_are_limited_each_on_their_own() -> None:
    clock = Clock()
    limiter = RefusalLimiter(clock=clock)
    assert limiter.admit("10.0.0.2") == 0
    assert limiter.admit("10.0.0.3") == 0
    assert limiter.admit("10.0.0.2") is None
    clock.now += 59.9
    assert limiter.admit("10.0.0.3") is None
    assert limiter.unreported() == {"10.0.0.2": 1, "10.0.0.3": 1}


def test_many_sources_get_ten_events_a_minute_in_all() -> None:
    clock = Clock()
    limiter = RefusalLimiter(clock=clock)
    admitted = [limiter.admit(f"10.0.{n // 250}.{n % 250}") for n in range(1000)]
    assert admitted.count(0) == 10
    assert admitted[10:] == [None] * 990
    assert sum(limiter.unreported().values()) == 990
    clock.now += 60.0
    assert limiter.admit("10.0.3.249") == 0  # a new window; its earlier one was reported


def test_a_source_refused_by_the_overall_cap_is_recorded_in_the_next_window() -> None:
    clock = Clock()
    limiter = RefusalLimiter(max_per_window=1, clock=clock)
    assert limiter.admit("a") == 0
    assert limiter.admit("b") is None  # the window's one event went to a
    clock.now += 60.0
    assert limiter.admit("b") == 1


def test_forgotten_sources_keep_their_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_http_refusals, "MAX_SOURCES", 2)
    clock = Clock()
    limiter = RefusalLimiter(clock=clock)
    assert limiter.admit("a") == 0
    assert limiter.admit("a") is None  # a: 1 counted
    clock.now += 1
    assert limiter.admit("b") == 0
    clock.now += 1
    assert limiter.admit("c") == 0  # a, recorded first, is forgotten with its count
    assert limiter.unreported() == {"other sources": 1}
