"""A whole campaign on a PostgreSQL lab, through the command line: ``rsilab run`` makes the
lab on first use, runs, and ``rsilab verify`` passes on the database and its artifact folder."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from rsilab.records import Campaign
from rsilab.store import Lab
from rsilab.store.postgres import PostgresStore
from tests.cli.helpers import explain, rsilab
from tests.store.pg_server import PgServer


def test_a_campaign_runs_and_verifies_on_a_postgres_lab(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    url = pg_server.lab_url(pg_server.database(), tmp_path / "artifacts")

    ran = rsilab("run", "synthetic", "--budget", "experiments=3", "--workers", "2", "--lab", url)

    assert ran.exit_code == 0, explain(ran)
    assert "experiment 3/3" in ran.stdout and "[finished]" in ran.stdout
    verified = rsilab("verify", "--deep", "--lab", url)
    assert verified.exit_code == 0, explain(verified)
    with Lab.open(url) as lab:
        assert isinstance(lab.store, PostgresStore)
        [campaign] = lab.store.query_as(Campaign)
        assert (tmp_path / "artifacts" / "reports" / f"{campaign.id}.md").is_file()
        assert not (tmp_path / "artifacts" / "lab.db").exists()


def _events_in(server: PgServer, database: str) -> int:
    """How many events the lab's database holds (0 before its tables exist)."""
    try:
        with psycopg.connect(server.url(database)) as conn:
            row = conn.execute("SELECT count(*) FROM events").fetchone()
    except psycopg.errors.UndefinedTable:
        return 0
    return 0 if row is None else int(row[0])


def test_a_run_whose_server_stays_away_stops_in_one_line_and_resumes_once_it_is_back(
    restarted: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server stops mid-run and stays away: the run (a process of its own) gives up
    after one reconnect window, not one per call it makes while stopping, with one error
    line and a failing exit; with the server back, ``rsilab resume`` finishes the campaign
    and the ledger verifies."""
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    database = restarted.database()
    url = restarted.lab_url(database, tmp_path / "artifacts")
    argv = [sys.executable, "-m", "rsilab", "run", "synthetic", "--budget", "experiments=20"]
    with subprocess.Popen(
        [*argv, "--lab", url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as child:
        while _events_in(restarted, database) < 5 and child.poll() is None:
            time.sleep(0.02)
        restarted.stop()
        out, err = child.communicate(timeout=600)  # a guard against a hang, not a measure
    said = f"exit {child.returncode}\nstdout:\n{out}\nstderr:\n{err}"

    assert child.returncode not in (0, None), said
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, said
    assert "cannot reach the PostgreSQL server" in errors[0], said

    restarted.start()
    with Lab.open(url) as lab:
        [campaign] = lab.store.query_as(Campaign)
    assert campaign.state == "running"  # as the stopped run left it
    resumed = rsilab("resume", campaign.id, "--lab", url)
    assert resumed.exit_code == 0, explain(resumed)
    assert "experiment 20/20" in resumed.stdout, explain(resumed)
    verified = rsilab("verify", "--deep", "--lab", url)
    assert verified.exit_code == 0, explain(verified)


def test_task_check_draws_the_splits_with_the_secret_of_a_postgres_lab(
    pg_server: PgServer, tmp_path: Path
) -> None:
    """A PostgreSQL lab's secret lies in its artifact folder, which holds no lab.db: the check
    finds the lab all the same, so it probes the tiers the lab's campaigns will draw."""
    url = pg_server.lab_url(pg_server.database(), tmp_path / "artifacts")
    assert rsilab("init", "--lab", url).exit_code == 0

    checked = rsilab("task", "check", "synthetic", "--no-probe", "--lab", url)

    assert checked.exit_code == 0, explain(checked)
    assert "secret of the lab" in checked.stderr
    assert (tmp_path / "artifacts" / "task-secret").is_file()
