"""Joining Ray: clusters this process starts for itself, one after another."""

from __future__ import annotations

import gc
import os
import secrets
from pathlib import Path

import pytest

from rsilab.executors._ray_cluster import RayRefused, connect
from tests.sandbox.helpers import bwrap_problem


@pytest.mark.timeout(300)  # two clusters started and checked, on a loaded machine
def test_each_cluster_started_here_is_joined_with_the_token_held_at_the_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ray caches the first token a process presents; a second cluster with another token
    (a test's restored environment, a user who changed it) must still be joined."""
    if bwrap_problem() is not None:
        pytest.skip(f"bubblewrap is unusable here ({bwrap_problem()})")
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    tokens = [secrets.token_hex(32), secrets.token_hex(32)]
    for token in tokens:
        monkeypatch.setenv("RAY_AUTH_TOKEN", token)
        cluster = connect(None, num_cpus=1)
        try:
            assert cluster.own and len(cluster.nodes) == 1
            assert os.environ["RAY_AUTH_TOKEN"] == token
        finally:
            cluster.close()


def _children_of_this_process() -> set[int]:
    """Read from each thread's children list (a second way to the same fact)."""
    found: set[int] = set()
    for listing in Path("/proc/self/task").glob("*/children"):
        found.update(int(pid) for pid in listing.read_text().split())
    return found


@pytest.mark.timeout(300)
def test_a_cluster_that_fails_half_way_through_its_start_leaves_no_process_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its GCS turns the driver away (the driver presents a token cached before the cluster's
    was set), so the start fails after GCS has started; the refusal stops every process the
    start made, and none is left for the garbage collector to warn of."""
    from ray._raylet import AuthenticationTokenLoader  # type: ignore[attr-defined]

    from rsilab.executors import _ray_cluster

    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    monkeypatch.setenv("RAY_AUTH_TOKEN", secrets.token_hex(32))
    real_token_mode = _ray_cluster._token_mode

    def with_a_stale_cached_token() -> None:
        real_token_mode()
        assert AuthenticationTokenLoader.instance().has_token()  # read and cached now
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)  # what the cluster will get

    monkeypatch.setattr(_ray_cluster, "_token_mode", with_a_stale_cached_token)
    monkeypatch.setenv("RAY_gcs_server_port_wait_time_s", "3")  # refused in seconds
    before = _children_of_this_process()
    with pytest.raises(RayRefused, match="cannot join the Ray cluster"):
        connect(None, num_cpus=1)
    assert _children_of_this_process() - before == set()
    gc.collect()  # a Popen left running would warn here, failing this test
