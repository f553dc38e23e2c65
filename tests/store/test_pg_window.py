"""The reconnect window's bookkeeping on its own (the store's use of it, against a real
server, is in test_postgres.py)."""

from __future__ import annotations

import time

import pytest

from rsilab.errors import LabError
from rsilab.store._pg_window import ReconnectWindow


def gone(cause: str) -> LabError:
    return LabError(f"cannot reach the PostgreSQL server of the lab L: {cause}", "start it")


def test_a_window_lasts_across_calls_and_ends_in_the_first_line_it_ended_on() -> None:
    window = ReconnectWindow(0.0, 10)

    first = window.lost(gone("socket missing"))
    later = window.lost(gone("connection refused"))

    assert first is not None and later is not None
    assert first.message == later.message == gone("socket missing").message
    assert later.hint == "start it"


def test_while_the_window_lasts_a_call_waits_and_attempts_are_capped() -> None:
    window = ReconnectWindow(5.0, 10)
    assert window.connect_timeout() == 10  # nothing lost yet: the whole connect timeout

    assert window.lost(gone("restarting")) is None
    assert 0 < window.left() <= 5
    assert 2 <= window.connect_timeout() <= 5


def test_a_short_window_still_gives_an_attempt_the_drivers_least_timeout() -> None:
    window = ReconnectWindow(0.5, 10)
    window.lost(gone("restarting"))
    assert window.connect_timeout() == 2


def test_a_success_ends_the_outage() -> None:
    window = ReconnectWindow(0.0, 10)
    assert window.lost(gone("down")) is not None

    window.reached()

    assert window.connect_timeout() == 10
    window.admit()  # lets the call try


def test_after_an_unanswered_attempt_a_spent_window_refuses_without_trying() -> None:
    window = ReconnectWindow(60.0, 10)
    window.failed_to_connect(time.monotonic() - 61.0, unanswered=True)  # began a window ago
    spent = window.lost(gone("connection timeout expired"))
    assert spent is not None

    with pytest.raises(LabError) as refused:
        window.admit()

    assert refused.value.message == spent.message


def test_after_a_refused_attempt_a_spent_window_still_lets_a_call_try_once() -> None:
    window = ReconnectWindow(60.0, 10)
    window.failed_to_connect(time.monotonic() - 61.0, unanswered=False)
    assert window.lost(gone("connection refused")) is not None

    window.admit()  # a server back up is used at once
