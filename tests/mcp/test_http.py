"""MCP over HTTP end to end, across a network: ``rsilab mcp --http`` bound on the host side of
a veth pair, the SDK's client in another network namespace (``tests/mcp/http_peer.py``).

One server serves the module; each case speaks from its own source address in the peer's
namespace, so the one-flag-per-source-per-minute limit never hides one case's flag from
another.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rsilab.expos import CallContext, ExperimentOS, default_registry
from rsilab.mcp import tokens
from rsilab.records import Event, Experiment, Outcome, ProtocolFlag, Role
from rsilab.store import Lab, verify_store
from tests.mcp.http_helpers import Prepared, Running, prepared, serving

ROOT = Path(__file__).resolve().parents[2]
PEER = Path(__file__).with_name("http_peer.py")


@dataclass
class Netns:
    """A network namespace joined to this one by a veth pair on a private /24."""

    name: str
    host_ip: str
    prefix: str  # "10.a.b."; the peer holds prefix + 2 .. prefix + 20

    def source(self, n: int) -> str:
        return f"{self.prefix}{n}"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@pytest.fixture(scope="module")
def netns() -> Iterator[Netns]:
    if os.geteuid() != 0:
        pytest.skip("creating a network namespace needs root")
    if shutil.which("ip") is None:
        pytest.skip("creating a network namespace needs iproute2's `ip`")
    tag = secrets.token_hex(3)
    name, host_if, peer_if = f"rsl{tag}", f"rh{tag}", f"rp{tag}"
    prefix = f"10.{random.randint(200, 250)}.{random.randint(1, 254)}."
    _ip("netns", "add", name)
    try:
        _ip("link", "add", host_if, "type", "veth", "peer", "name", peer_if)
        _ip("link", "set", peer_if, "netns", name)
        _ip("addr", "add", f"{prefix}1/24", "dev", host_if)
        _ip("link", "set", host_if, "up")
        for n in range(2, 21):
            _ip("-n", name, "addr", "add", f"{prefix}{n}/24", "dev", peer_if)
        _ip("-n", name, "link", "set", peer_if, "up")
        _ip("-n", name, "link", "set", "lo", "up")
        yield Netns(name, f"{prefix}1", prefix)
    finally:
        subprocess.run(["ip", "link", "del", host_if], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


@dataclass
class Served(Prepared):
    """A prepared lab served on the host side of the veth, with --allow-remote."""

    url: str = ""
    running: Running | None = None


@pytest.fixture(scope="module")
def served(netns: Netns, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    lab = prepared(tmp_path_factory.mktemp("http"))
    with serving(lab, f"{netns.host_ip}:0", "--allow-remote") as running:
        yield Served(**vars(lab), url=running.url, running=running)


@pytest.fixture
def lab_keys(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reads of the served lab use its key folder."""
    monkeypatch.setenv("RSILAB_KEY_DIR", str(served.keys))


def peer(netns: Netns, url: str, *steps: dict[str, Any]) -> list[dict[str, Any]]:
    """Run the steps from the peer's namespace; their results."""
    done = subprocess.run(
        ["ip", "netns", "exec", netns.name, sys.executable, str(PEER)],
        input=json.dumps({"url": url, "steps": list(steps)}),
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results: list[dict[str, Any]] = json.loads(done.stdout)
    return results


def _flags_from(lab_path: Path, source: str) -> list[tuple[Event, ProtocolFlag]]:
    """The refusal events whose detail names ``source`` (as ``from 10.a.b.n``), with flags."""
    found = []
    with Lab.open(lab_path) as lab:
        for event in lab.store.events(after=0):
            if event.action != "http_auth_refused" or f"from {source}" not in event.detail:
                continue
            flag = lab.store.get(event.records[0].id)
            assert isinstance(flag, ProtocolFlag)
            found.append((event, flag))
    return found


def test_the_server_announced_its_address_on_the_veth(served: Served, netns: Netns) -> None:
    assert served.url.startswith(f"http://{netns.host_ip}:")
    assert served.url.endswith("/mcp")
    assert served.running is not None and served.running.process.poll() is None
    warning = served.running.errors.read_text()
    assert warning.startswith("warning: serving MCP over plain HTTP on " + served.url)
    assert "reverse proxy" in warning


@pytest.mark.usefixtures("lab_keys")
def test_a_worker_runs_an_experiment_over_http_with_its_token(served: Served, netns: Netns) -> None:
    experiment_calls: list[list[Any]] = [
        ["create_experiment", {"direction_id": served.direction_id, "description": "remote"}],
    ]
    first = peer(
        netns,
        served.url,
        {
            "op": "session",
            "token": served.texts["worker"],
            "source": netns.source(2),
            "calls": experiment_calls,
        },
    )[0]
    assert first["calls"][0]["is_error"] is False
    experiment_id = first["calls"][0]["value"]["id"]
    calls = [
        ["write_file", {"path": "train.py", "content": "print('remote')\n"}],
        ["read_file", {"path": "train.py"}],
        ["log_metric", {"experiment_id": experiment_id, "name": "acc", "value": 0.75}],
        ["finish_experiment", {"experiment_id": experiment_id, "status": "succeeded"}],
        ["get_experiment", {"experiment_id": experiment_id}],
    ]
    step = {"op": "session", "token": served.texts["worker"], "source": netns.source(2)}
    second = peer(netns, served.url, {**step, "calls": calls})[0]
    assert "create_experiment" in second["tools"] and "write_file" in second["tools"]
    assert "create_direction" not in second["tools"]  # main only: not even listed
    assert [c["is_error"] for c in second["calls"]] == [False] * 5, second["calls"]
    assert "print('remote')" in json.dumps(second["calls"][1]["value"])

    with Lab.open(served.lab) as lab:
        experiment = lab.store.get_as(experiment_id, Experiment)
        assert experiment.created_by == "remote-w"
        assert str(experiment.state) == "succeeded"
        tool_events = [e for e in lab.store.events(campaign_id=served.campaign_id) if e.tool]
        mine = [(e.tool, e.actor, e.role) for e in tool_events if e.actor == "remote-w"]
        assert mine == [
            ("create_experiment", "remote-w", "worker"),
            ("write_file", "remote-w", "worker"),
            ("read_file", "remote-w", "worker"),
            ("log_metric", "remote-w", "worker"),
            ("finish_experiment", "remote-w", "worker"),
            ("get_experiment", "remote-w", "worker"),
        ]
        folder = lab.path / "workspaces" / served.campaign_id / "remote-w" / "train.py"
        assert folder.read_text() == "print('remote')\n"


@pytest.mark.usefixtures("lab_keys")
def test_a_worker_token_cannot_call_a_main_only_tool(served: Served, netns: Netns) -> None:
    calls = [["create_direction", {"title": "mine now", "hypothesis": "h"}]]
    step = {"op": "session", "token": served.texts["worker"], "source": netns.source(3)}
    result = peer(netns, served.url, {**step, "calls": calls})[0]
    refused = result["calls"][0]
    assert refused["is_error"] is True
    assert refused["value"]["error"] == "permission_denied"
    with Lab.open(served.lab) as lab:
        last = [e for e in lab.store.events(campaign_id=served.campaign_id) if e.tool][-1]
        assert (last.tool, last.actor, last.role, last.outcome) == (
            "create_direction",
            "remote-w",
            "worker",
            Outcome.DENIED,
        )
        titles = [d["title"] for d in _directions(lab, served.campaign_id)]
        assert titles == ["wd"]


def _directions(lab: Lab, campaign_id: str) -> list[dict[str, Any]]:
    expos = ExperimentOS(lab.store, lab.artifacts, default_registry())
    listed = expos.call(CallContext("cli", Role.HUMAN, campaign_id), "list_directions", {})
    assert listed.value is not None
    directions: list[dict[str, Any]] = listed.value["directions"]
    return directions


REFUSED_CASES = [
    # case, source, rule of the flag, actor recorded
    ("wrong", 4, "unknown_token", "unauthenticated"),
    ("expired", 5, "expired_token", "remote-e"),
    ("revoked", 6, "revoked_token", "remote-x"),
    ("other_campaign", 7, "token_for_another_campaign", "remote-o"),
    ("missing", 8, "missing_token", "unauthenticated"),
]


@pytest.mark.usefixtures("lab_keys")
@pytest.mark.parametrize(("case", "source", "rule", "actor"), REFUSED_CASES)
def test_a_bad_token_gets_401_and_a_flag(
    served: Served, netns: Netns, case: str, source: int, rule: str, actor: str
) -> None:
    if case == "wrong":
        text: str | None = "rsl_" + secrets.token_urlsafe(32)
    elif case == "missing":
        text = None
    else:
        text = served.texts[case]
    address = netns.source(source)
    raw, sdk = peer(
        netns,
        served.url,
        {"op": "raw", "token": text, "source": address, "count": 1},
        {"op": "refused_session", "token": text, "source": address},
    )
    assert raw["statuses"] == [401]
    assert raw["www_authenticate"].startswith("Bearer ")
    assert json.loads(raw["body"])["error"] == "invalid_token"
    assert sdk["refused"] is True
    flags = _flags_from(served.lab, address)
    assert len(flags) == 1  # the SDK's attempt came within the same minute: counted only
    event, flag = flags[0]
    assert event.outcome == Outcome.DENIED and event.campaign_id == served.campaign_id
    assert (flag.rule, flag.actor, str(flag.stage), flag.blocked) == (rule, actor, "access", True)


@pytest.mark.usefixtures("lab_keys")
def test_a_token_revoked_while_serving_is_refused_at_once(served: Served, netns: Netns) -> None:
    step = {"op": "session", "token": served.texts["revoked_later"], "source": netns.source(9)}
    before = peer(netns, served.url, {**step, "calls": [["list_directions", {}]]})[0]
    assert before["calls"][0]["is_error"] is False
    with Lab.open(served.lab) as lab:
        tokens.revoke(lab.store, served.ids["revoked_later"])
    after = peer(netns, served.url, {**step, "op": "raw", "count": 1})[0]
    assert after["statuses"] == [401]
    [(_, flag)] = _flags_from(served.lab, netns.source(9))
    assert (flag.rule, flag.actor) == ("revoked_token", "remote-r")


@pytest.mark.usefixtures("lab_keys")
def test_a_flood_of_bad_requests_writes_one_flag(served: Served, netns: Netns) -> None:
    address = netns.source(10)
    with Lab.open(served.lab) as lab:
        before = lab.store.head()[0]
    bad = "rsl_" + secrets.token_urlsafe(32)
    flood = peer(netns, served.url, {"op": "raw", "token": bad, "source": address, "count": 200})[0]
    assert flood["statuses"] == [401] * 200
    with Lab.open(served.lab) as lab:
        written = lab.store.events(after=before)
    assert len(written) == 1, [e.detail for e in written]
    assert f"from {address}" in written[0].detail


@pytest.mark.usefixtures("lab_keys")
@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Host": "rebind.example"}, 421),
        ({"Origin": "http://rebind.example"}, 403),
    ],
)
def test_a_bad_host_or_origin_is_refused(
    served: Served, netns: Netns, headers: dict[str, str], status: int
) -> None:
    with Lab.open(served.lab) as lab:
        before = lab.store.head()[0]
    step = {"op": "raw", "token": served.texts["worker"], "source": netns.source(11)}
    refused = peer(netns, served.url, {**step, "count": 1, "headers": headers})[0]
    assert refused["statuses"] == [status]
    with Lab.open(served.lab) as lab:
        assert lab.store.head()[0] == before  # refused before any token or tool was used


def test_stopping_the_server_records_the_counted_refusals_and_signs_the_ledger(
    netns: Netns, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = prepared(tmp_path_factory.mktemp("http"))
    monkeypatch.setenv("RSILAB_KEY_DIR", str(made.keys))
    bad = "rsl_" + secrets.token_urlsafe(32)
    with serving(made, f"{netns.host_ip}:0", "--allow-remote") as running:
        url, process = running.url, running.process
        flood = peer(
            netns,
            url,
            {"op": "raw", "token": bad, "source": netns.source(12), "count": 5},
            {"op": "raw", "token": None, "source": netns.source(13), "count": 3},
        )
        assert [f["statuses"] for f in flood] == [[401] * 5, [401] * 3]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    with Lab.open(made.lab) as lab:
        refusals = [e for e in lab.store.events(after=0) if e.action == "http_auth_refused"]
        assert len(refusals) == 3  # one per source, then the counts at the end
        last = refusals[-1]
        flag = lab.store.get(last.records[0].id)
        assert isinstance(flag, ProtocolFlag) and flag.rule == "refusals_counted"
        # each source's first refusal had its own event; the others are counted here
        assert "6 refused requests from 2 sources" in last.detail
        assert f"{netns.source(12)}: 4, {netns.source(13)}: 2" in last.detail
        assert lab.store.checkpoints()[-1].seq == lab.store.head()[0]  # closed cleanly, signed
        report = verify_store(lab.store)
        assert report.ok, report.problems
