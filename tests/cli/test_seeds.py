"""Two runs on one lab: without --seed each campaign draws its own seed (printed, recorded);
with --seed N both use N; a run started while another campaign of the lab is running warns
on stderr, in one line naming it, and goes on."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import rsilab as api
from rsilab.orchestrator.campaign._lease import acquire_lease
from rsilab.records import Campaign
from rsilab.store import Lab
from tests.cli.helpers import explain, rsilab

ONE = ("--budget", "experiments=1")


@pytest.fixture(autouse=True)
def _process_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    path = tmp_path / "lab"
    assert rsilab("init", "--lab", path).exit_code == 0
    return path


def _seeds(lab: Path) -> dict[str, object]:
    """Each campaign's recorded seed, by id."""
    with Lab.open(lab) as opened:
        return {c.id: c.settings.get("seed") for c in opened.store.query_as(Campaign)}


def test_runs_without_a_seed_draw_different_ones_and_say_which(lab: Path) -> None:
    printed = []
    for _ in range(2):
        ran = rsilab("run", "synthetic", *ONE, "--lab", lab)
        assert ran.exit_code == 0, explain(ran)
        said = re.search(r"seed (\d+) \(drawn; --seed \1 repeats it\)", ran.stdout)
        assert said is not None, explain(ran)
        printed.append(int(said.group(1)))
    recorded = list(_seeds(lab).values())
    assert sorted(recorded) == sorted(printed)  # type: ignore[type-var]
    assert len(set(recorded)) == 2
    assert all(isinstance(s, int) and 0 <= s <= 2**21 for s in recorded)


def test_runs_with_a_seed_use_it(lab: Path) -> None:
    for _ in range(2):
        ran = rsilab("run", "synthetic", *ONE, "--seed", "7", "--lab", lab)
        assert ran.exit_code == 0, explain(ran)
        assert "drawn" not in ran.stdout
    assert list(_seeds(lab).values()) == [7, 7]


def test_the_largest_seed_runs(lab: Path) -> None:
    """2**21: the built-in Worker's job seeds (seed * 1000 + n) stay below 2**31."""
    ran = rsilab("run", "synthetic", *ONE, "--seed", str(2**21), "--lab", lab)
    assert ran.exit_code == 0, explain(ran)
    assert list(_seeds(lab).values()) == [2**21]


def test_the_python_api_draws_a_seed_too(lab: Path) -> None:
    first = api.run("synthetic", budget={"experiments": 1}, lab=lab)
    second = api.run("synthetic", budget={"experiments": 1}, lab=lab)
    seeds = _seeds(lab)
    assert seeds[first.campaign_id] != seeds[second.campaign_id]


def test_a_run_beside_a_running_campaign_warns_and_goes_on(lab: Path) -> None:
    made = rsilab("campaign", "new", "synthetic", "--lab", lab)
    assert made.exit_code == 0, explain(made)
    other = made.stdout.strip()
    with Lab.open(lab) as opened:
        # Held by this (live) process; a long ttl so a slow machine cannot expire it.
        lease = acquire_lease(opened.store, other, ttl_s=3600)
        try:
            ran = rsilab("run", "synthetic", *ONE, "--lab", lab)
        finally:
            lease.release()
    assert ran.exit_code == 0, explain(ran)
    warnings = [line for line in ran.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, explain(ran)
    assert f"campaign {other} is running in this lab" in warnings[0]
    assert "[finished]" in ran.stdout  # it went on
    after = rsilab("run", "synthetic", *ONE, "--lab", lab)  # released: no warning
    assert after.exit_code == 0 and "warning:" not in after.stderr, explain(after)
