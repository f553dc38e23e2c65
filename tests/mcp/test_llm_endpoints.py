"""``--llm-endpoint HOST:PORT``: what is accepted, and where each endpoint appears inside."""

from __future__ import annotations

import json
from pathlib import PurePosixPath

import pytest

from rsilab.errors import UserError
from rsilab.mcp.llm_endpoints import (
    BASE_HOSTS,
    MAX_ENDPOINTS,
    Endpoint,
    hosts_file,
    parse_endpoint,
    plan,
    relay_config,
)


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        ("api.openai.com:443", "api.openai.com", 443),
        ("LLM.Example:8000", "llm.example", 8000),
        ("vllm_box:8000", "vllm_box", 8000),
        ("localhost:11434", "localhost", 11434),
        ("127.0.0.1:65535", "127.0.0.1", 65535),
        ("[::1]:1", "::1", 1),
    ],
)
def test_endpoints_that_are_accepted(text: str, host: str, port: int) -> None:
    endpoint = parse_endpoint(text)
    assert endpoint == Endpoint(host, port)
    assert parse_endpoint(str(endpoint)) == endpoint


@pytest.mark.parametrize(
    ("text", "message", "hint"),
    [
        ("https://api.openai.com/v1", "is a URL", "--llm-endpoint api.openai.com:443"),
        ("http://localhost:8000/v1", "is a URL", "--llm-endpoint localhost:8000"),
        ("api.openai.com/v1", "is a URL", "HOST:PORT"),
        ("api.openai.com", "has no port", "HOST:PORT"),
        (":443", "has no port", "HOST:PORT"),
        ("h.test:0", "1 to 65535", "HOST:PORT"),
        ("h.test:65536", "1 to 65535", "HOST:PORT"),
        ("h.test:https", "1 to 65535", "HOST:PORT"),
        ("::1:80", "in brackets", "[::1]:8000"),
        ("bad..name:80", "not a host name", "HOST:PORT"),
        ("-x.test:80", "not a host name", "HOST:PORT"),
        ("10.0.0.5:8000", "no route to 10.0.0.5", "host name"),
        ("[2001:db8::1]:443", "no route", "host name"),
    ],
)
def test_bad_endpoints_are_user_errors(text: str, message: str, hint: str) -> None:
    with pytest.raises(UserError, match=message) as caught:
        parse_endpoint(text)
    assert caught.value.hint is not None and hint in caught.value.hint


def test_each_endpoint_has_its_place_inside() -> None:
    served = plan(["a.test:443", "b.test:443", "a.test:8000", "localhost:8000", "127.0.0.2:9"])
    assert [s.addresses for s in served] == [
        ("127.77.0.1",),
        ("127.77.0.2",),  # two hosts on one port: two addresses
        ("127.77.0.1",),  # one host: one address
        ("127.0.0.1", "::1"),
        ("127.0.0.2",),
    ]
    assert hosts_file(served) == BASE_HOSTS + "127.77.0.1 a.test\n127.77.0.2 b.test\n"
    config = relay_config(served, PurePosixPath("/rsilab/net"))
    assert json.loads(json.dumps(config))[0] == {
        "endpoint": "a.test:443",
        "listen": ["127.77.0.1"],
        "port": 443,
        "socket": "/rsilab/net/a.test_443.sock",
    }
    assert plan([]) == ()


@pytest.mark.parametrize(
    "texts",
    [
        ["a.test:80", "A.test:80"],
        ["localhost:80", "127.0.0.1:80"],
        ["localhost:80", "[::1]:80"],
        ["[::1]:5", "[0::1]:5"],
    ],
)
def test_two_endpoints_in_one_place_are_refused(texts: list[str]) -> None:
    with pytest.raises(UserError, match="would both be served"):
        plan(texts)


def test_at_most_a_few_endpoints() -> None:
    texts = [f"h{n}.test:443" for n in range(MAX_ENDPOINTS + 1)]
    assert len(plan(texts[:-1])) == MAX_ENDPOINTS
    with pytest.raises(UserError, match=f"at most {MAX_ENDPOINTS}"):
        plan(texts)
