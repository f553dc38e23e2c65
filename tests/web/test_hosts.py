"""The dashboard answers only requests that name it by its own host names (DNS rebinding),
and takes a form post only from its own pages, on a real server over loopback."""

from __future__ import annotations

import re
import socket
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from rsilab.records import Guidance
from rsilab.store import Lab
from rsilab.web._hosts import LocalOnly
from tests.cli.helpers import explain, rsilab
from tests.web.serving import Reply, Served, serve

EVIL = "rebind.evil.example"


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Path, str]]:
    """A lab with one running campaign (it takes guidance), served."""
    lab = tmp_path_factory.mktemp("hosts") / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    made = rsilab("campaign", "new", "synthetic", "--lab", lab)
    assert made.exit_code == 0, explain(made)
    with serve(lab) as served:
        yield served, lab, made.stdout.strip()


def _port(served: Served) -> int:
    return int(served.base.rsplit(":", 1)[1])


def get(served: Served, path: str, host: str) -> Reply:
    request = urllib.request.Request(served.base + path, headers={"Host": host})
    return served.send(request)


def post(served: Served, path: str, fields: dict[str, str], headers: dict[str, str]) -> Reply:
    request = urllib.request.Request(
        served.base + path,
        data=urllib.parse.urlencode(fields).encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded", **headers},
    )
    return served.send(request, follow=False)


def token_of(served: Served, cid: str) -> str:
    found = re.search(r'name="token" value="([^"]+)"', served.get(f"/campaigns/{cid}").text)
    assert found is not None
    return found[1]


def guidance(lab: Path, cid: str) -> list[str]:
    with Lab.open(lab) as opened:
        return [g.text for g in opened.store.query_as(Guidance, campaign_id=cid)]


def test_a_page_asked_for_by_another_host_name_is_refused(
    running: tuple[Served, Path, str],
) -> None:
    served, _, cid = running
    port = _port(served)
    refused = get(served, f"/campaigns/{cid}", f"{EVIL}:{port}")
    assert refused.status == 421
    assert 'name="token"' not in refused.text and EVIL in refused.text
    assert get(served, "/api/head", EVIL).status == 421
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "LOCALHOST"):
        assert get(served, f"/campaigns/{cid}", host).status == 200, host


def test_a_request_without_a_host_is_refused(running: tuple[Served, Path, str]) -> None:
    served, _, _ = running
    with socket.create_connection(("127.0.0.1", _port(served)), timeout=30) as conn:
        conn.sendall(b"GET / HTTP/1.0\r\n\r\n")
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 400")


def test_guidance_from_a_rebound_name_or_another_origin_is_not_recorded(
    running: tuple[Served, Path, str],
) -> None:
    served, lab, cid = running
    port = _port(served)
    token = token_of(served, cid)
    path = f"/campaigns/{cid}/guidance"
    own = f"http://127.0.0.1:{port}"
    tries = [
        ({"Host": f"{EVIL}:{port}", "Origin": f"http://{EVIL}:{port}"}, 421),
        ({"Origin": f"http://{EVIL}:{port}"}, 403),
        ({"Origin": "null"}, 403),
        ({"Origin": f"http://127.0.0.1:{port + 1}"}, 403),  # another local program's page
        ({"Referer": f"http://{EVIL}:{port}/campaigns/{cid}"}, 403),
    ]
    for headers, status in tries:
        answer = post(served, path, {"text": "forged", "token": token}, headers)
        assert answer.status == status, headers
    assert guidance(lab, cid) == []
    sent = post(served, path, {"text": "from the page", "token": token}, {"Origin": own})
    assert sent.status == 303
    referred = {"Referer": f"{own}/campaigns/{cid}"}
    assert post(served, path, {"text": "by referer", "token": token}, referred).status == 303
    assert guidance(lab, cid) == ["from the page", "by referer"]


def test_an_explicitly_bound_address_is_accepted_too() -> None:
    async def app(scope: object, receive: object, send: object) -> None:
        raise AssertionError("not called")

    def scope(host: str) -> dict[str, object]:
        return {"type": "http", "method": "GET", "headers": [(b"host", host.encode())]}

    guard = LocalOnly(app, ("127.0.0.1", "localhost", "::1", "10.1.2.3"))
    assert guard.refusal(scope("10.1.2.3:8765")) is None
    assert guard.refusal(scope("[::1]")) is None
    refused = guard.refusal(scope("10.1.2.4:8765"))
    assert refused is not None and refused[0] == 421
    two = {"type": "http", "method": "GET", "headers": [(b"host", b"localhost")] * 2}
    assert guard.refusal(two) == (400, "refused: the request names more than one Host")
