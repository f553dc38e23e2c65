"""A whole campaign on a PostgreSQL lab, through the command line: ``rsilab run`` makes the
lab on first use, runs, and ``rsilab verify`` passes on the database and its artifact folder."""

from __future__ import annotations

from pathlib import Path

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
