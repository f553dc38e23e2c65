"""rsilab.mcp.wire.read: where client bytes become a JSON-RPC message (the transports' tests
send the same cases over real stdio, a real Unix socket and real HTTP)."""

from __future__ import annotations

import json

import mcp_types as types
import pytest

from rsilab.mcp.wire import Refusal, read
from tests.mcp.hostile import CASES, Hostile, brackets_in_a_string, many_keys_call


def _answer(refusal: Refusal) -> dict[str, object]:
    answer = json.loads(refusal.to_json())
    assert isinstance(answer, dict)
    return answer


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_each_hostile_message_is_refused_with_its_error(case: Hostile) -> None:
    refused = read(case.data)
    assert isinstance(refused, Refusal), case.name
    answer = _answer(refused)
    assert answer["jsonrpc"] == "2.0" and answer["id"] == case.id
    error = answer["error"]
    assert isinstance(error, dict) and error["code"] == case.code
    assert case.says in str(error["message"])


def _levels(n: int) -> bytes:
    """A ``tools/list`` whose whole message nests exactly ``n`` levels."""
    inner = "[" * (n - 2) + "]" * (n - 2)
    return f'{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"x":{inner}}}}}'.encode()


def test_the_limit_is_128_levels_counting_the_message_itself() -> None:
    assert not isinstance(read(_levels(127)), Refusal)
    assert not isinstance(read(_levels(128)), Refusal)
    refused = read(_levels(129))
    assert isinstance(refused, Refusal) and "128 levels" in refused.problem


def test_brackets_quotes_and_backslashes_inside_strings_are_not_nesting() -> None:
    message = read(brackets_in_a_string(5))
    assert isinstance(message, types.JSONRPCRequest)
    assert message.params is not None
    assert message.params["arguments"]["content"].startswith('\\"[{\\"[{')


def test_a_string_that_ends_in_an_escaped_backslash_closes() -> None:
    # the quote after \\ closes the string, so the brackets after it nest: 130 levels
    deep = "[" * 130 + "]" * 130
    text = f'{{"jsonrpc":"2.0","id":2,"method":"m","params":{{"a":"x\\\\","b":{deep}}}}}'
    refused = read(text.encode())
    assert isinstance(refused, Refusal) and refused.id == 2 and "128 levels" in refused.problem


def test_many_keys_within_the_limits_are_a_message() -> None:
    assert isinstance(read(many_keys_call(6)), types.JSONRPCRequest)


def test_a_notification_or_response_is_answered_without_an_id() -> None:
    deep = b"[" * 300 + b"]" * 300
    for data in (
        b'{"jsonrpc":"2.0","method":"notifications/x","params":{"a":' + deep + b"}}",
        b'{"jsonrpc":"2.0","id":3,"result":{"a":' + deep + b"}}",  # no method: not a request
        b'{"jsonrpc":"2.0","id":true,"method":"m","params":{"a":' + deep + b"}}",
    ):
        refused = read(data)
        assert isinstance(refused, Refusal) and refused.id is None and refused.code == -32600


def test_a_batch_is_refused() -> None:
    refused = read(b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]')
    assert isinstance(refused, Refusal) and refused.code == -32600
