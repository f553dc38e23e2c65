"""A garbled ``lab.db`` on the command line: one message naming where, and verify exits 3."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from tests.cli.helpers import explain, rsilab


def _checkpointed(lab: Path) -> Path:
    db = lab / "lab.db"
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for extra in lab.glob("lab.db-*"):
        extra.unlink()
    return db


def _garble_page_of(lab: Path, table: str) -> None:
    db = _checkpointed(lab)
    with closing(sqlite3.connect(db)) as conn:
        (page,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)
        ).fetchone()
    data = bytearray(db.read_bytes())
    for i in range((page - 1) * 4096 + 8, page * 4096, 3):
        data[i] ^= 0xA5
    db.write_bytes(bytes(data))


@pytest.mark.parametrize("table", ["records", "events"])
def test_verify_exits_3_on_a_damaged_page_and_names_its_table(
    lab: Path, campaign_id: str, table: str
) -> None:
    _garble_page_of(lab, table)
    result = rsilab("verify", "--lab", lab)
    assert result.exit_code == 3, explain(result)
    assert "FAILED" in result.stdout and f"table {table}" in result.stdout
    assert "Traceback" not in result.output


def test_verify_exits_3_when_the_file_is_no_database(lab: Path) -> None:
    _checkpointed(lab).write_bytes(os.urandom(8192))
    result = rsilab("verify", "--lab", lab)
    assert result.exit_code == 3, explain(result)
    assert "not a readable rsilab lab database" in result.stdout
    as_json = rsilab("verify", "--json", "--lab", lab)
    assert as_json.exit_code == 3 and '"ok": false' in as_json.stdout


def test_reading_a_row_that_does_not_parse_names_table_and_row(lab: Path, campaign_id: str) -> None:
    with closing(sqlite3.connect(lab / "lab.db")) as conn, conn:
        conn.execute("UPDATE records SET body = json_object('id', 1) WHERE id = ?", (campaign_id,))
    result = rsilab("campaign", "list", "--lab", lab)
    assert result.exit_code == 2, explain(result)
    assert f"table records, row {campaign_id} (kind campaign)" in result.stderr
    assert "rsilab verify" in result.stderr and "backup" in result.stderr
    assert "Traceback" not in result.output
    assert rsilab("verify", "--lab", lab).exit_code == 3
