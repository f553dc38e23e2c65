"""verify_store catches tampering: the SQL backends edited behind the store's back, MemoryStore
via its hooks.

Every SQL scenario runs on SQLite and on PostgreSQL: it builds a lab, closes it (which signs the
head), edits the database the way an attacker with write access to the lab but not to the key
folder would (sqlite3 on the file, psycopg on the database), then reopens it and verifies.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rsilab.errors import LabDamaged
from rsilab.records import Event, EventDraft, RecordRef
from rsilab.store import MemoryStore, SQLiteStore, Store, VerifyReport, keys, verify_store
from rsilab.store.ledger import (
    GENESIS_HASH,
    StoredEvent,
    StoredRecord,
    build_event,
    make_checkpoint,
    record_text,
    sha256_text,
)
from rsilab.store.postgres import PostgresStore
from tests.store.helpers import fill, finding
from tests.store.pg_server import PgServer

EVENTS = 10


class RawPg:
    """The attacker's psycopg connection, taking sqlite3's ``?`` placeholders."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[object] = ()) -> Any:
        return self._conn.execute(sql.replace("?", "%s").encode(), params)


@dataclass
class SqlLab:
    """Where a test's lab lives: an SQLite file, or a database of the session's server."""

    folder: Path
    server: PgServer | None
    database: str = ""

    def where(self) -> str | Path:
        if self.server is None:
            return self.folder / "lab.db"
        return self.server.lab_url(self.database, self.folder / "artifacts")

    def open(self, *, create: bool = False) -> Store:
        if self.server is None:
            return SQLiteStore.open(Path(self.where()), create=create)
        if create:
            self.database = self.server.database()
        return PostgresStore.open(str(self.where()), create=create)

    @contextmanager
    def raw(self) -> Iterator[Any]:
        """The attacker's connection, in autocommit mode."""
        if self.server is None:
            with closing(sqlite3.connect(self.where(), isolation_level=None)) as conn:
                yield conn
            return
        import psycopg

        with psycopg.connect(self.server.url(self.database), autocommit=True) as conn:
            # The attacker owns the database: the constraints that stop a buggy writer from
            # forking the chain are no obstacle to them, so they go first.
            conn.execute(
                b"ALTER TABLE events DROP CONSTRAINT IF EXISTS events_seq_check, "
                b"DROP CONSTRAINT IF EXISTS events_prev_hash_key, "
                b"DROP CONSTRAINT IF EXISTS events_event_id_key, "
                b"ALTER COLUMN prev_hash DROP NOT NULL, ALTER COLUMN event_id DROP NOT NULL"
            )
            yield RawPg(conn)


@pytest.fixture(params=["sqlite", "postgres"])
def lab(request: pytest.FixtureRequest, tmp_path: Path) -> SqlLab:
    server = request.getfixturevalue("pg_server") if request.param == "postgres" else None
    return SqlLab(tmp_path, server)


def make_lab(lab: SqlLab, events: int = EVENTS, *, plain_tail: int = 0) -> SqlLab:
    """A closed lab with ``events`` events that write records, then ``plain_tail`` that don't."""
    with lab.open(create=True) as store:
        fill(store, events)
        fill(store, plain_tail, with_records=False)
    return lab


def verify_lab(lab: SqlLab) -> VerifyReport:
    with lab.open() as store:
        return verify_store(store)


def lab_id(lab: SqlLab) -> str:
    with lab.raw() as conn:
        return str(conn.execute("SELECT value FROM meta WHERE key = 'lab_id'").fetchone()[0])


def event_body(conn: Any, seq: int) -> tuple[str, str]:
    body, digest = conn.execute("SELECT body, hash FROM events WHERE seq = ?", (seq,)).fetchone()
    return str(body), str(digest)


def edited(body: str, seq: int) -> str:
    new = body.replace(f'"detail":"event {seq}"', f'"detail":"event {seq}, as I recall it"')
    assert new != body
    return new


def rebuilt_chain(rows: list[StoredEvent]) -> list[StoredEvent]:
    """The whole chain rebuilt with valid hashes, each event's detail changed, same records."""
    out: list[StoredEvent] = []
    prev = GENESIS_HASH
    for row in rows:
        event = Event.model_validate_json(row.text)
        fields = event.model_dump(exclude={"seq", "at", "records", "prev_hash"})
        fields["detail"] = f"{event.detail} (rewritten)"
        _, stored = build_event(EventDraft(**fields), row.seq, prev, event.records)
        out.append(stored)
        prev = stored.hash
    return out


def assert_caught(report: VerifyReport, first_bad_seq: int | None, words: str) -> None:
    assert not report.ok
    assert report.first_bad_seq == first_bad_seq, report.problems
    assert words in report.problems[0], report.problems


def test_untampered_lab_verifies(lab: SqlLab) -> None:
    report = verify_lab(make_lab(lab))

    assert report.ok, report.problems
    assert report.events == EVENTS
    assert report.checkpoints_checked >= 1
    assert report.warnings == []


# -- events ------------------------------------------------------------------------------------


def test_edited_event_body_names_that_event(lab: SqlLab) -> None:
    make_lab(lab)
    with lab.raw() as conn:
        body, _ = event_body(conn, 4)
        conn.execute("UPDATE events SET body = ? WHERE seq = 4", (edited(body, 4),))

    assert_caught(verify_lab(lab), 4, "event 4: content does not match its hash")


def test_edited_event_with_recomputed_hash_names_the_next_event(lab: SqlLab) -> None:
    make_lab(lab)
    with lab.raw() as conn:
        body, _ = event_body(conn, 4)
        new = edited(body, 4)
        conn.execute("UPDATE events SET body = ?, hash = ? WHERE seq = 4", (new, sha256_text(new)))

    assert_caught(verify_lab(lab), 5, "event 5: does not follow event 4")


def test_last_event_rehashed_is_caught_by_the_signed_head(lab: SqlLab) -> None:
    make_lab(lab)
    with lab.raw() as conn:
        body, _ = event_body(conn, EVENTS)
        new = edited(body, EVENTS)
        conn.execute(
            "UPDATE events SET body = ?, hash = ? WHERE seq = ?", (new, sha256_text(new), EVENTS)
        )

    assert_caught(verify_lab(lab), EVENTS, "differs from the signed checkpoint")


def test_event_deleted_from_the_middle(lab: SqlLab) -> None:
    make_lab(lab)
    with lab.raw() as conn:
        conn.execute("DELETE FROM events WHERE seq = 4")

    assert_caught(verify_lab(lab), 4, "events removed")


def test_event_inserted_in_the_middle(lab: SqlLab) -> None:
    make_lab(lab)
    with lab.raw() as conn:
        _, prev = event_body(conn, 3)
        # Make room at seq 4 (negating first avoids primary-key clashes), then forge event 4.
        conn.execute("UPDATE events SET seq = -seq WHERE seq >= 4")
        conn.execute("UPDATE events SET seq = 1 - seq WHERE seq < 0")
        forged = EventDraft(actor="intruder", role="worker", action="tool_call")
        _, stored = build_event(forged, 4, prev, [])
        conn.execute(
            "INSERT INTO events (seq, hash, campaign_id, body) VALUES (?, ?, NULL, ?)",
            (stored.seq, stored.hash, stored.text),
        )

    assert_caught(verify_lab(lab), 5, "event 5: does not follow event 4")


def test_tail_cut_with_its_checkpoints_is_caught_by_the_watermark(lab: SqlLab) -> None:
    # 64 < total, so a checkpoint was written inside the lab and a watermark beside the key.
    make_lab(lab, 60, plain_tail=10)
    with lab.raw() as conn:
        assert [r[0] for r in conn.execute("SELECT seq FROM checkpoints")] == [64, 70]
        conn.execute("DELETE FROM events WHERE seq > 60")
        conn.execute("DELETE FROM checkpoints WHERE seq > 60")
    watermark = keys.load_watermark(lab_id(lab))
    assert watermark is not None and watermark.seq == 70

    report = verify_lab(lab)

    assert_caught(report, 61, "ledger ends at event 60")
    assert "signed checkpoint records event 70" in report.problems[0]


def test_tail_cut_keeping_checkpoints_is_caught(lab: SqlLab) -> None:
    make_lab(lab, EVENTS, plain_tail=3)
    with lab.raw() as conn:
        conn.execute("DELETE FROM events WHERE seq > ?", (EVENTS,))

    assert_caught(verify_lab(lab), EVENTS + 1, f"ledger ends at event {EVENTS}")


@pytest.mark.parametrize("checkpoints", ["kept", "deleted", "forged"])
def test_chain_rewritten_without_the_key(lab: SqlLab, checkpoints: str) -> None:
    make_lab(lab)
    with lab.raw() as conn:
        rows = [
            StoredEvent(int(s), str(h), str(b))
            for s, h, b in conn.execute("SELECT seq, hash, body FROM events ORDER BY seq")
        ]
        for row in rebuilt_chain(rows):
            conn.execute(
                "UPDATE events SET hash = ?, body = ? WHERE seq = ?", (row.hash, row.text, row.seq)
            )
        head = rebuilt_chain(rows)[-1]
        if checkpoints != "kept":
            conn.execute("DELETE FROM checkpoints")
        if checkpoints == "forged":
            fake = make_checkpoint(secrets.token_bytes(32), lab_id(lab), head.seq, head.hash)
            conn.execute(
                "INSERT INTO checkpoints VALUES (?, ?, ?, ?)",
                (fake.seq, fake.head_hash, fake.mac, fake.at),
            )

    report = verify_lab(lab)

    if checkpoints == "forged":
        assert_caught(report, EVENTS, "signature invalid (forged)")
    else:
        assert_caught(report, EVENTS, "differs from the signed checkpoint (chain rewritten)")


# -- a writer killed before it could sign the head -------------------------------------------

KILLED_WRITER = """
import os, signal, sys
from pathlib import Path
from rsilab.records import EventDraft
from rsilab.store import PostgresStore, SQLiteStore

where = sys.argv[1]
pg = where.startswith("postgresql")
store = PostgresStore.open(where) if pg else SQLiteStore.open(Path(where))
for i in range(int(sys.argv[2])):
    store.commit(EventDraft(actor="w", role="worker", action="test", detail=f"killed {i}"))
os.kill(os.getpid(), signal.SIGKILL)  # no close(): nothing signs the head on the way out
"""


def killed_writer_lab(lab: SqlLab, before: int, by_killed: int) -> SqlLab:
    """A lab with ``before`` events closed cleanly, then ``by_killed`` more from a process
    killed with SIGKILL (fewer than 64, so no signed checkpoint lands in the lab)."""
    make_lab(lab, before)
    src = Path(__file__).resolve().parents[2] / "src"
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-c", KILLED_WRITER, str(lab.where()), str(by_killed)],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == -signal.SIGKILL, done.stderr
    with lab.raw() as conn:
        assert conn.execute("SELECT max(seq) FROM checkpoints").fetchone()[0] == before
        assert conn.execute("SELECT max(seq) FROM events").fetchone()[0] == before + by_killed
    return lab


def test_a_tail_cut_after_a_killed_writer_is_caught(lab: SqlLab) -> None:
    killed_writer_lab(lab, 8, 22)
    with lab.raw() as conn:
        conn.execute("DELETE FROM events WHERE seq > 19")

    report = verify_lab(lab)

    assert_caught(report, 20, "ledger ends at event 19")
    assert "records event 30" in report.problems[0]


def test_the_last_event_of_a_killed_writer_cut_is_caught(lab: SqlLab) -> None:
    killed_writer_lab(lab, 4, 3)
    with lab.raw() as conn:
        conn.execute("DELETE FROM events WHERE seq = 7")

    assert_caught(verify_lab(lab), 7, "ledger ends at event 6")


def test_a_tail_rewritten_after_a_killed_writer_is_caught(lab: SqlLab) -> None:
    killed_writer_lab(lab, 5, 40)
    with lab.raw() as conn:
        rows = [
            StoredEvent(int(s), str(h), str(b))
            for s, h, b in conn.execute("SELECT seq, hash, body FROM events ORDER BY seq")
        ]
        # events 20.. rewritten, each hash re-chained from the untouched event 19
        prev = rows[18].hash
        for row in rows[19:]:
            event = Event.model_validate_json(row.text)
            fields = event.model_dump(exclude={"seq", "at", "records", "prev_hash"})
            fields["detail"] = "nothing happened here"
            _, stored = build_event(EventDraft(**fields), row.seq, prev, event.records)
            conn.execute(
                "UPDATE events SET hash = ?, body = ? WHERE seq = ?",
                (stored.hash, stored.text, stored.seq),
            )
            prev = stored.hash

    assert_caught(verify_lab(lab), 45, "event 45: differs from the signed checkpoint")


def test_a_writer_after_a_cut_tail_is_refused(lab: SqlLab) -> None:
    killed_writer_lab(lab, 3, 10)
    with lab.raw() as conn:
        conn.execute("DELETE FROM events WHERE seq > 10")

    with (
        pytest.raises(LabDamaged, match="ends at event 10, but event 13 was recorded"),
        lab.open() as store,
    ):
        fill(store, 1)
    with lab.raw() as conn:
        assert conn.execute("SELECT max(seq) FROM events").fetchone()[0] == 10


# -- records -----------------------------------------------------------------------------------


def test_record_body_edited(lab: SqlLab) -> None:
    make_lab(lab)
    with lab.raw() as conn:
        rid, body = conn.execute("SELECT id, body FROM records ORDER BY id LIMIT 1").fetchone()
        data = json.loads(body)
        data["status"] = "supported"
        conn.execute(
            "UPDATE records SET body = ? WHERE id = ?",
            (json.dumps(data, sort_keys=True, separators=(",", ":")), rid),
        )

    assert_caught(verify_lab(lab), None, f"record {rid}: differs from")


def test_record_revision_edited(lab: SqlLab) -> None:
    make_lab(lab)
    with lab.raw() as conn:
        rid = conn.execute("SELECT id FROM records ORDER BY id LIMIT 1").fetchone()[0]
        conn.execute("UPDATE records SET rev = rev + 1 WHERE id = ?", (rid,))

    assert_caught(verify_lab(lab), None, f"record {rid}: differs from")


def test_record_inserted_without_an_event(lab: SqlLab) -> None:
    make_lab(lab)
    planted = finding("planted")
    planted.rev = 1
    with lab.raw() as conn:
        conn.execute(
            "INSERT INTO records (id, kind, campaign_id, rev, body) VALUES (?, ?, NULL, 1, ?)",
            (planted.id, planted.KIND, record_text(planted)),
        )

    assert_caught(verify_lab(lab), None, f"record {planted.id}: no event in the ledger wrote it")


def test_record_deleted(lab: SqlLab) -> None:
    make_lab(lab)
    with lab.raw() as conn:
        rid = conn.execute("SELECT id FROM records ORDER BY id LIMIT 1").fetchone()[0]
        conn.execute("DELETE FROM records WHERE id = ?", (rid,))

    assert_caught(verify_lab(lab), None, f"record {rid}: written by the ledger but missing")


# -- keys --------------------------------------------------------------------------------------


def test_missing_key_gives_a_warning_and_an_incomplete_report(
    lab: SqlLab, isolated_environment: Path
) -> None:
    make_lab(lab)
    key_file = isolated_environment / f"{lab_id(lab)}.key"
    assert key_file.is_file()
    key_file.unlink()

    report = verify_lab(lab)

    assert report.ok, report.problems
    assert not report.complete
    assert report.checkpoints_checked == 0
    assert report.checkpoints_unchecked >= 1
    assert any("not checked" in w and "key was not found" in w for w in report.warnings)


def test_wrong_key_fails_the_checkpoints(lab: SqlLab, monkeypatch: pytest.MonkeyPatch) -> None:
    make_lab(lab)
    monkeypatch.setenv("RSILAB_LEDGER_KEY", "not the lab's key")

    assert_caught(verify_lab(lab), EVENTS, "signature invalid")


# -- MemoryStore through its tamper hooks ------------------------------------------------------

MEMORY_KEY = bytes(range(32))


def memory_store(events: int = EVENTS, *, plain_tail: int = 0) -> MemoryStore:
    store = MemoryStore(key=MEMORY_KEY)
    fill(store, events)
    fill(store, plain_tail, with_records=False)
    store.checkpoint_now()
    return store


def verify_memory(store: MemoryStore) -> VerifyReport:
    return verify_store(store, key=MEMORY_KEY)


def test_memory_untampered_verifies() -> None:
    report = verify_memory(memory_store())

    assert report.ok, report.problems
    assert report.checkpoints_checked == 1


def test_memory_edited_event_body() -> None:
    store = memory_store()
    rows = list(store.stored_events())
    rows[3] = StoredEvent(4, rows[3].hash, edited(rows[3].text, 4))
    store._tamper_events(rows)

    assert_caught(verify_memory(store), 4, "event 4: content does not match its hash")


def test_memory_edited_event_with_recomputed_hash() -> None:
    store = memory_store()
    rows = list(store.stored_events())
    text = edited(rows[3].text, 4)
    rows[3] = StoredEvent(4, sha256_text(text), text)
    store._tamper_events(rows)

    assert_caught(verify_memory(store), 5, "event 5: does not follow event 4")


def test_memory_event_deleted() -> None:
    store = memory_store()
    rows = list(store.stored_events())
    del rows[3]
    store._tamper_events(rows)

    assert_caught(verify_memory(store), 4, "events removed")


def test_memory_event_inserted() -> None:
    store = memory_store()
    rows = list(store.stored_events())
    _, forged = build_event(
        EventDraft(actor="intruder", role="worker", action="tool_call"), 4, rows[2].hash, []
    )
    rows.insert(3, forged)
    store._tamper_events(rows)

    assert_caught(verify_memory(store), 4, "inserted or duplicated")


def test_memory_tail_cut() -> None:
    store = memory_store(60, plain_tail=10)
    store._tamper_events(list(store.stored_events())[:60])

    assert_caught(verify_memory(store), 61, "ledger ends at event 60")


def test_memory_chain_rewritten_without_the_key() -> None:
    store = memory_store()
    store._tamper_events(rebuilt_chain(list(store.stored_events())))

    assert_caught(verify_memory(store), EVENTS, "chain rewritten")


def test_memory_record_edited() -> None:
    store = memory_store()
    row = next(store.stored_records())
    store._tamper_record(
        StoredRecord(row.id, row.kind, row.rev, row.text.replace("claim", "Claim"))
    )

    assert_caught(verify_memory(store), None, f"record {row.id}: differs from")


def test_memory_record_inserted() -> None:
    store = memory_store()
    planted = finding("planted")
    planted.rev = 1
    store._tamper_record(StoredRecord(planted.id, planted.KIND, 1, record_text(planted)))

    assert_caught(verify_memory(store), None, "no event in the ledger wrote it")


def test_memory_record_rewritten_with_a_consistent_ref_is_still_caught() -> None:
    """Editing a record and its event's digest breaks that event's hash."""
    store = memory_store()
    rows = list(store.stored_events())
    event = Event.model_validate_json(rows[0].text)
    record = store.get(event.records[0].id)
    forged_text = record_text(record).replace("claim 1", "claim one")
    assert forged_text != record_text(record)
    ref = RecordRef(kind=record.KIND, id=record.id, rev=1, digest=sha256_text(forged_text))
    body = json.loads(rows[0].text)
    body["records"] = [ref.model_dump()]
    rows[0] = StoredEvent(1, rows[0].hash, json.dumps(body))
    store._tamper_events(rows)
    store._tamper_record(StoredRecord(record.id, record.KIND, 1, forged_text))

    assert_caught(verify_memory(store), 1, "event 1: content does not match its hash")
