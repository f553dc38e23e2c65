"""Messages no honest MCP client sends, and the JSON-RPC error each must get, on every
transport (stdio, the Unix socket, HTTP). The limits are written here as literals: 128
levels of nesting, 8 MiB per message. Each refusal must also reach the lab's ledger: one
denied ``mcp_message_refused`` event with one blocked flag (:func:`refusals_in`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rsilab.records import Event, ProtocolFlag
from rsilab.store.base import Store

DEEP = 100_000


@dataclass(frozen=True)
class Hostile:
    """One message and the error it must be answered with."""

    name: str
    data: bytes
    code: int
    id: str | int | None
    says: str  # a piece of the error's message


def _call(id_: Any, name: str, arguments_json: str) -> bytes:
    head = f'{{"jsonrpc":"2.0","id":{json.dumps(id_)},"method":"tools/call",'
    return (head + f'"params":{{"name":"{name}","arguments":{arguments_json}}}}}').encode()


CASES = [
    Hostile(
        "deep arrays as params",
        (
            b'{"jsonrpc":"2.0","id":11,"method":"tools/list","params":'
            + b"[" * DEEP
            + b"]" * DEEP
            + b"}"
        ),
        -32600,
        11,
        "deeper than 128 levels",
    ),
    Hostile(
        "deep objects, the id after them",
        (
            b'{"jsonrpc":"2.0","method":"tools/call","params":'
            + b'{"a":' * DEEP
            + b"1"
            + b"}" * DEEP
            + b',"id":"after"}'
        ),
        -32600,
        "after",
        "deeper than 128 levels",
    ),
    Hostile(
        "deep inside a valid tool call's arguments",
        _call(13, "write_file", '{"path":"x.txt","content":' + "[" * DEEP + "]" * DEEP + "}"),
        -32600,
        13,
        "deeper than 128 levels",
    ),
    Hostile(
        "129 levels: one past the limit",
        _call(14, "list_files", "[" * 127 + "]" * 127),
        -32600,
        14,
        "deeper than 128 levels",
    ),
    Hostile(
        "deep and never closed",
        b'{"jsonrpc":"2.0","id":15,"method":"tools/list","params":' + b"[" * DEEP,
        -32700,
        None,
        "not JSON",
    ),
    Hostile(
        "a string over the size limit",
        _call(16, "write_file", '{"path":"big.txt","content":"' + "x" * (9 << 20) + '"}'),
        -32600,
        None,
        "over the limit of 8388608 bytes",
    ),
    Hostile(
        "invalid UTF-8 in a string",
        _call(17, "write_file", '{"path":"u.txt","content":"ok"}').replace(b"ok", b"o\xff\xfek"),
        -32600,
        17,
        "not UTF-8",
    ),
    Hostile(
        "a lone surrogate escape",
        _call(18, "write_file", '{"path":"s.txt","content":"\\ud800"}'),
        -32600,
        18,
        "not JSON",
    ),
    Hostile("not JSON at all", b"{this is not json", -32700, None, "not JSON"),
    Hostile(
        "params that are a string",
        b'{"jsonrpc":"2.0","id":"p","method":"tools/call","params":"x"}',
        -32600,
        "p",
        "invalid request",
    ),
]


def by_name() -> dict[str, Hostile]:
    return {case.name: case for case in CASES}


def many_keys_call(id_: int, keys: int = 200_000) -> bytes:
    """A ``list_files`` call with ``keys`` unknown arguments: within the limits, so it reaches
    the dispatcher, which refuses it as a tool error."""
    arguments = json.dumps({f"k{i}": i for i in range(keys)})
    return _call(id_, "list_files", arguments)


def brackets_in_a_string(id_: int) -> bytes:
    """A ``write_file`` whose content holds 200,000 brackets, quotes and backslashes: text,
    not nesting, so the tool writes it."""
    content = '\\"[{' * 50_000 + "\\\\" + "]}" * 50_000
    return _call(id_, "write_file", json.dumps({"path": "brackets.txt", "content": content}))


def error_of(answer: dict[str, Any], case: Hostile) -> None:
    """Assert ``answer`` is the JSON-RPC error ``case`` must get."""
    assert answer.get("id", "missing") == case.id, (case.name, answer)
    assert answer["error"]["code"] == case.code, (case.name, answer)
    assert case.says in answer["error"]["message"], (case.name, answer)


JUST_OVER = 8 * 1024 * 1024 + 1
"""One byte over the 8 MiB limit."""


def just_over_the_limit(id_: str) -> bytes:
    """A ``tools/list`` of exactly :data:`JUST_OVER` bytes (its padding a string param)."""
    head = f'{{"jsonrpc":"2.0","id":"{id_}","method":"tools/list","params":{{"pad":"'
    tail = '"}}'
    message = (head + "p" * (JUST_OVER - len(head) - len(tail)) + tail).encode()
    assert len(message) == JUST_OVER
    return message


def objects_deep(id_: str, levels: int = 200) -> bytes:
    """A ``list_files`` call whose arguments nest ``levels`` objects, past the wire's 128."""
    inner = '{"y":' * levels + "0" + "}" * levels
    head = f'{{"jsonrpc":"2.0","id":"{id_}","method":"tools/call",'
    return (head + f'"params":{{"name":"list_files","arguments":{{"x":{inner}}}}}}}').encode()


def refusals_in(store: Store) -> list[tuple[Event, ProtocolFlag]]:
    """Each ``mcp_message_refused`` event of the ledger with the one flag it wrote, oldest
    first; asserts each wrote exactly one flag, and kept no message bytes."""
    found = []
    for event in store.events():
        if event.action != "mcp_message_refused":
            continue
        assert [ref.kind for ref in event.records] == ["flag"], event
        flag = store.get_as(event.records[0].id, ProtocolFlag)
        assert len(event.model_dump_json()) < 2000, "a refusal event must not keep the message"
        found.append((event, flag))
    return found


def check_refusal(
    event: Event, flag: ProtocolFlag, actor: str, role: str, campaign_id: str, says: str
) -> None:
    """Assert a refusal event and its flag name the caller and what was wrong."""
    assert (event.actor, event.role, event.campaign_id) == (actor, role, campaign_id), event
    assert event.outcome.value == "denied" and event.error is not None
    assert event.error["error"] == "message_refused" and says in event.error["message"], event
    assert (flag.actor, flag.role, flag.campaign_id) == (actor, role, campaign_id), flag
    assert (flag.stage.value, flag.rule, flag.blocked) == ("access", "mcp_message_refused", True)
    assert says in flag.detail, flag
