"""A damaged lab database: readers name the table and row, verification reports it.

Damage is made with plain ``sqlite3`` and byte writes, as a disk fault or an edit outside
rsilab would make it; the expected table and row names are literals.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from rsilab.errors import LabDamaged
from rsilab.records import Finding
from rsilab.store import SQLiteStore, verify_store
from tests.store.helpers import draft, fill, finding

PAGE = 4096


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "lab.db"
    store = SQLiteStore.open(path, create=True)
    fill(store, 6)
    store.close()
    yield path


def _edit(path: Path, sql: str, *args: object) -> None:
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(sql, args)


def _root_page(path: Path, table: str) -> int:
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        (page,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)
        ).fetchone()
    return int(page)


def _scramble_page(path: Path, page: int) -> None:
    data = bytearray(path.read_bytes())
    start = (page - 1) * PAGE
    for i in range(start + 8, start + PAGE, 3):
        data[i] ^= 0xA5
    path.write_bytes(bytes(data))


def _a_finding_id(path: Path) -> str:
    with closing(sqlite3.connect(path)) as conn:
        (rid,) = conn.execute("SELECT id FROM records WHERE kind = 'finding' LIMIT 1").fetchone()
    return str(rid)


def test_a_record_that_does_not_parse_names_its_table_and_row(db: Path) -> None:
    rid = _a_finding_id(db)
    _edit(db, "UPDATE records SET body = json_object('id', 7) WHERE id = ?", rid)
    store = SQLiteStore.open(db)
    try:
        for read in (lambda: store.get(rid), lambda: store.query_as(Finding)):
            with pytest.raises(LabDamaged) as caught:
                read()
            assert f"table records, row {rid} (kind finding)" in caught.value.message
            assert (caught.value.table, caught.value.row) == ("records", f"{rid} (kind finding)")
            assert "rsilab verify" in caught.value.hint and "backup" in caught.value.hint
        with pytest.raises(LabDamaged, match="table records"):  # nor can it be written over
            store.commit(draft(), [Finding.model_validate({**finding().model_dump(), "id": rid})])
    finally:
        store.close()


def test_an_event_that_does_not_parse_names_its_sequence_number(db: Path) -> None:
    _edit(db, "UPDATE events SET body = '[1]' WHERE seq = 3")
    store = SQLiteStore.open(db)
    try:
        with pytest.raises(LabDamaged, match="table events, row seq 3"):
            store.events()
    finally:
        store.close()


def test_a_damaged_page_names_its_table(db: Path) -> None:
    _scramble_page(db, _root_page(db, "records"))
    with pytest.raises(LabDamaged) as caught:
        store = SQLiteStore.open(db)
        try:
            store.query()
        finally:
            store.close()
    assert "is damaged" in caught.value.message
    assert "table records" in caught.value.message
    assert caught.value.table == "records"
    assert "backup" in caught.value.hint


def test_a_file_that_is_no_database_is_damaged_not_missing(db: Path) -> None:
    for extra in db.parent.glob("lab.db-*"):
        extra.unlink()
    db.write_bytes(b"\x00" * 8192)
    with pytest.raises(LabDamaged, match="not a readable rsilab lab database"):
        SQLiteStore.open(db)


def _verified(db: Path) -> list[str]:
    store = SQLiteStore.open(db)
    try:
        return verify_store(store).problems
    finally:
        store.close()


def test_verification_reports_a_damaged_page(db: Path) -> None:
    _scramble_page(db, _root_page(db, "events"))
    problems = _verified(db)
    assert problems and any("table events" in p for p in problems), problems


def test_verification_reports_a_record_stored_under_another_kind(db: Path) -> None:
    rid = _a_finding_id(db)
    _edit(db, "UPDATE records SET kind = 'campaign' WHERE id = ?", rid)
    problems = _verified(db)
    assert problems == [
        f"record {rid} (table records, stored as kind 'campaign'): its id is of kind 'finding' "
        "(edited outside rsilab)"
    ]


def test_an_intact_lab_verifies(db: Path) -> None:
    assert _verified(db) == []
