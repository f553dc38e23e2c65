"""Fixtures of the store tests: a PostgreSQL server for the session, a database per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.store.pg_server import PgServer, start_server, stop_server


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgServer]:
    """One PostgreSQL server for the session, started on first use (skips or fails where
    PostgreSQL is missing: see tests/store/pg_server.py)."""
    server = start_server(tmp_path_factory.mktemp("pg"))
    try:
        yield server
    finally:
        stop_server(server)


@pytest.fixture
def pg_lab_url(pg_server: PgServer, tmp_path: Path) -> str:
    """The ``--lab`` URL of a fresh empty database, artifacts in this test's folder."""
    return pg_server.lab_url(pg_server.database(), tmp_path / "pg-lab")


@pytest.fixture
def restarted(pg_server: PgServer) -> Iterator[PgServer]:
    """The session's server, started again after the test whatever it did to it."""
    try:
        yield pg_server
    finally:
        if not (pg_server.data / "postmaster.pid").exists():
            pg_server.start()
