"""SQLite-specific behaviour: WAL, migrations, and bad or failing databases (several writer
processes: test_processes.py, on every SQL backend)."""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import pytest

from rsilab.errors import ConflictError, LabError, NotFoundError
from rsilab.records import SCHEMA_VERSION, Direction, EventDraft, RecordRef, utc_now
from rsilab.store import SQLiteStore, keys, verify_store
from rsilab.store._sqlite_schema import migrate
from rsilab.store.ledger import (
    GENESIS_HASH,
    build_event,
    canonical_json,
    make_checkpoint,
    record_text,
    sha256_text,
)
from tests.sandbox.unprivileged import run_as_test_user
from tests.store.helpers import draft, fill, finding


def read_meta(path: Path) -> dict[str, str]:
    with closing(sqlite3.connect(path)) as conn:
        return dict(conn.execute("SELECT key, value FROM meta").fetchall())


def tables(path: Path) -> set[str]:
    with closing(sqlite3.connect(path)) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def new_lab(path: Path, events: int = 3) -> Path:
    with SQLiteStore.open(path, create=True) as store:
        fill(store, events)
    return path


def test_wal_mode_is_on(tmp_path: Path) -> None:
    path = tmp_path / "lab.db"
    with closing(SQLiteStore.open(path, create=True)) as store:
        assert store._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store.path == path
    with closing(sqlite3.connect(path)) as conn:  # persistent in the file
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_every_commit_is_synced_to_the_disk(tmp_path: Path) -> None:
    """synchronous=FULL (2): a power cut loses no acknowledged event (NORMAL, 1, did)."""
    path = tmp_path / "lab.db"
    with closing(SQLiteStore.open(path, create=True)) as store:
        assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 2
    with closing(SQLiteStore.open(path)) as store:
        assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 2


def test_reopened_lab_keeps_everything(tmp_path: Path) -> None:
    path = tmp_path / "lab.db"
    with SQLiteStore.open(path, create=True) as store:
        written = fill(store, 5)
        lab_id, head = store.lab_id, store.head()

    with SQLiteStore.open(path) as store:
        assert (store.lab_id, store.head()) == (lab_id, head)
        assert [r.id for r in store.query()] == [r.id for r in written]
        assert verify_store(store).ok


# -- migrations --------------------------------------------------------------------------------


def build_v1_lab(path: Path) -> tuple[str, list[str]]:
    """A schema-1 lab written by hand: three events (the third updates the first record)."""
    lab_id = "lab-00000000000000v1"
    key = keys.create_key(lab_id)
    first, second = finding("first"), finding("second")
    writes = [[first], [second], [first]]
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("BEGIN")
        migrate(conn, 0, 1)
        conn.executemany(
            "INSERT INTO meta VALUES (?, ?)",
            [("app", "rsilab"), ("lab_id", lab_id), ("created_at", utc_now())],
        )
        prev = GENESIS_HASH
        for seq, records in enumerate(writes, start=1):
            refs = []
            for record in records:
                record.rev += 1
                record.claim += " (v1)" if record.rev > 1 else ""
                text = record_text(record)
                refs.append(
                    RecordRef(
                        kind=record.KIND, id=record.id, rev=record.rev, digest=sha256_text(text)
                    )
                )
                conn.execute(
                    "INSERT OR REPLACE INTO records VALUES (?, ?, NULL, ?, ?)",
                    (record.id, record.KIND, record.rev, text),
                )
            _, stored = build_event(draft(f"event {seq}"), seq, prev, refs)
            conn.execute(
                "INSERT INTO events VALUES (?, ?, NULL, ?)", (seq, stored.hash, stored.text)
            )
            prev = stored.hash
        cp = make_checkpoint(key, lab_id, len(writes), prev)
        conn.execute(
            "INSERT INTO checkpoints VALUES (?, ?, ?, ?)", (cp.seq, cp.head_hash, cp.mac, cp.at)
        )
        conn.execute("COMMIT")
    return lab_id, [first.id, second.id]


def test_schema_1_lab_is_upgraded_with_a_backup(tmp_path: Path) -> None:
    path = tmp_path / "lab.db"
    lab_id, (first_id, second_id) = build_v1_lab(path)
    assert read_meta(path)["schema_version"] == "1"
    assert "event_records" not in tables(path)

    with SQLiteStore.open(path) as store:
        assert store.lab_id == lab_id
        assert [e.seq for e in store.events(record_id=first_id)] == [1, 3]
        assert [e.seq for e in store.events(record_id=second_id)] == [2]
        report = verify_store(store)
        assert report.ok, report.problems
        assert report.checkpoints_checked == 1
        updated = store.get(first_id)
        assert updated.rev == 2
        store.commit(draft("after upgrade"), [updated])
        assert [e.seq for e in store.events(record_id=first_id)] == [1, 3, 4]

    backup = tmp_path / "lab.db.v1.bak"
    assert backup.is_file()
    assert read_meta(backup)["schema_version"] == "1"
    assert "event_records" not in tables(backup)
    assert read_meta(path)["schema_version"] == str(SCHEMA_VERSION) == "3"


def test_upgrade_raced_by_another_process_is_harmless(tmp_path: Path) -> None:
    """Two processes open an old lab at once; the one that reads the version first loses."""
    path = tmp_path / "lab.db"
    _, (first_id, _) = build_v1_lab(path)
    with closing(sqlite3.connect(path, isolation_level=None)) as late:
        # ``late`` has read schema version 1; meanwhile another process upgrades and writes.
        with SQLiteStore.open(path) as store:
            store.commit(draft("after the upgrade"))

        SQLiteStore._upgrade(late, path, 1)

    assert read_meta(path)["schema_version"] == str(SCHEMA_VERSION)
    assert read_meta(tmp_path / "lab.db.v1.bak")["schema_version"] == "1"
    with SQLiteStore.open(path) as store:
        assert [e.seq for e in store.events(record_id=first_id)] == [1, 3]
        assert store.head()[0] == 4
        assert verify_store(store).ok


def build_v2_lab(path: Path) -> list[str]:
    """A schema-2 lab holding directions in the states schema 2 knew, one event each."""
    lab_id = "lab-00000000000000v2"
    key = keys.create_key(lab_id)
    ids, prev = [], GENESIS_HASH
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("BEGIN")
        migrate(conn, 0, 2)
        conn.executemany(
            "INSERT INTO meta VALUES (?, ?)",
            [("app", "rsilab"), ("lab_id", lab_id), ("created_at", utc_now())],
        )
        for seq, state in enumerate(["open", "concluded", "abandoned"], start=1):
            direction = Direction(title=state, hypothesis="h", rev=1)
            body = direction.model_dump(mode="json", exclude={"history"})
            text = canonical_json({**body, "state": state})
            ref = RecordRef(kind="direction", id=direction.id, rev=1, digest=sha256_text(text))
            conn.execute(
                "INSERT INTO records VALUES (?, 'direction', NULL, 1, ?)", (direction.id, text)
            )
            _, stored = build_event(draft(f"event {seq}"), seq, prev, [ref])
            conn.execute(
                "INSERT INTO events VALUES (?, ?, NULL, ?)", (seq, stored.hash, stored.text)
            )
            conn.execute("INSERT INTO event_records VALUES (?, ?)", (direction.id, seq))
            ids.append(direction.id)
            prev = stored.hash
        cp = make_checkpoint(key, lab_id, 3, prev)
        conn.execute(
            "INSERT INTO checkpoints VALUES (?, ?, ?, ?)", (cp.seq, cp.head_hash, cp.mac, cp.at)
        )
        conn.execute("COMMIT")
    return ids


def test_schema_2_directions_read_with_their_current_states(tmp_path: Path) -> None:
    path = tmp_path / "lab.db"
    open_id, concluded_id, abandoned_id = build_v2_lab(path)

    with SQLiteStore.open(path) as store:
        states = [store.get_as(i, Direction).state for i in (open_id, concluded_id, abandoned_id)]
        assert states == ["open", "exhausted", "exhausted"]
        report = verify_store(store)  # the rows were not rewritten, so the digests still hold
        assert report.ok, report.problems
        with pytest.raises(ConflictError):  # the old final states stay final
            store.commit(draft("reopen"), [store.get(concluded_id)])
        store.commit(draft("update"), [store.get(open_id)])

    assert read_meta(path)["schema_version"] == str(SCHEMA_VERSION) == "3"
    assert read_meta(tmp_path / "lab.db.v2.bak")["schema_version"] == "2"


# -- bad input ---------------------------------------------------------------------------------


def test_missing_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "lab.db"

    with pytest.raises(LabError) as info:
        SQLiteStore.open(path)

    assert "no lab database" in info.value.message
    assert "rsilab init" in info.value.hint
    assert not path.exists()


def test_existing_lab_is_not_created_again(tmp_path: Path) -> None:
    path = new_lab(tmp_path / "lab.db")
    before = path.read_bytes()

    with pytest.raises(LabError, match="already exists"):
        SQLiteStore.open(path, create=True)

    assert path.read_bytes() == before


def _corrupt(path: Path) -> None:
    path.write_bytes(random.Random(0).randbytes(16384))


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _foreign(path: Path) -> None:
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("CREATE TABLE users (name TEXT)")
        conn.execute("INSERT INTO users VALUES ('ada')")


def _foreign_meta(path: Path) -> None:
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        conn.executemany(
            "INSERT INTO meta VALUES (?, ?)", [("app", "otherapp"), ("lab_id", "lab-x")]
        )


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (_corrupt, "corrupt or a foreign file"),
        (_empty, "empty database, not yet a lab"),
        (_foreign, "SQLite database but not an rsilab lab"),
        (_foreign_meta, "not an rsilab lab (foreign metadata)"),
    ],
)
def test_foreign_or_corrupt_files_are_refused_untouched(
    tmp_path: Path, make: Callable[[Path], None], words: str
) -> None:
    path = tmp_path / "lab.db"
    make(path)
    before = path.read_bytes()

    with pytest.raises(LabError) as info:
        SQLiteStore.open(path)

    assert words in info.value.message
    assert info.value.hint
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lab.db"]


def test_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    path = new_lab(tmp_path / "lab.db")
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    before = path.read_bytes()

    with pytest.raises(LabError) as info:
        SQLiteStore.open(path)

    assert "schema version 99" in info.value.message
    assert "upgrade rsilab" in info.value.hint
    assert path.read_bytes() == before
    assert not list(tmp_path.glob("*.bak"))
    with closing(sqlite3.connect(path)) as conn, conn:  # data was intact all along
        conn.execute(
            "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),)
        )
    with SQLiteStore.open(path) as store:
        assert store.head()[0] == 3
        assert verify_store(store).ok


def test_full_database_gives_lab_error_and_keeps_what_was_recorded(tmp_path: Path) -> None:
    with closing(SQLiteStore.open(tmp_path / "lab.db", create=True)) as store:
        kept = fill(store, 5)
        head = store.head()
        pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
        store._conn.execute(f"PRAGMA max_page_count = {pages + 1}")
        big = finding("x" * 200_000)

        with pytest.raises(LabError) as info:
            store.commit(draft("too big"), [big])

        assert "full" in info.value.message
        assert "nothing from this change was recorded" in info.value.message
        assert store.head() == head
        assert big.rev == 0
        with pytest.raises(NotFoundError):
            store.get(big.id)
        assert [store.get(r.id) for r in kept] == kept
        assert verify_store(store).ok
        store._conn.execute("PRAGMA max_page_count = 1073741823")
        assert store.commit(draft("room again"), [big]).seq == head[0] + 1
        assert verify_store(store).ok


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder another local user can read (pytest's own temp root is private to us)."""
    folder = Path(tempfile.mkdtemp(prefix="rsilab-test-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


WRITE_ONCE = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from rsilab.errors import LabError
    from rsilab.records import EventDraft
    from rsilab.store import SQLiteStore

    try:
        with SQLiteStore.open(Path(sys.argv[1])) as store:
            store.commit(EventDraft(actor="x", role="human", action="write"))
    except LabError as exc:
        print("LabError:", exc)
        sys.exit(3)
    print("written")
    """
)


def run_as_unprivileged(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run Python code as a fresh unprivileged uid, whom file permissions bind (they do not
    bind root); ``args`` are paths it is given. The run sees this interpreter and checkout
    wherever they lie (tests/sandbox/unprivileged.py), so the check never has to be skipped."""
    workdir = Path(tempfile.mkdtemp(prefix="rsilab-test-user-home-"))
    keys = os.environ.get("RSILAB_KEY_DIR")
    # this checkout's code, not what the interpreter's site-packages point at
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    env |= {"RSILAB_KEY_DIR": keys} if keys else {}
    reachable = [Path(arg) for arg in args] + ([Path(keys)] if keys else [])
    try:
        return run_as_test_user(
            ["-c", code, *args], workdir, env=env, timeout=120, reachable=reachable
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def test_unwritable_lab_gives_lab_error(shared_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_KEY_DIR", str(shared_dir / "keys"))
    lab = shared_dir / "lab"
    lab.mkdir(mode=0o755)
    path = new_lab(lab / "lab.db")
    (shared_dir / "keys").chmod(0o755)

    if os.geteuid() == 0:
        proc = run_as_unprivileged(WRITE_ONCE, str(path))
        output = proc.stdout + proc.stderr
        assert proc.returncode == 3, output
        assert "LabError" in output
        assert "read-only" in output
    else:
        lab.chmod(0o555)
        path.chmod(0o444)
        try:
            with pytest.raises(LabError, match="read-only"), SQLiteStore.open(path) as store:
                store.commit(draft("write"))
        finally:
            lab.chmod(0o755)
            path.chmod(0o644)

    with SQLiteStore.open(path) as store:
        assert store.head()[0] == 3
        assert verify_store(store).ok


# -- a read-only lab ---------------------------------------------------------------------------

READ_ONLY = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from rsilab.errors import LabError
    from rsilab.records import EventDraft
    from rsilab.store import SQLiteStore, verify_store

    with SQLiteStore.open(Path(sys.argv[1]), read_only=True) as store:
        report = verify_store(store)
        print("head", store.head()[0], "ok", report.ok, "complete", report.complete)
        try:
            store.commit(EventDraft(actor="x", role="human", action="write"))
        except LabError as exc:
            print("refused:", exc)
    """
)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def read_only_lab(shared_dir: Path, monkeypatch: pytest.MonkeyPatch, wal: str) -> Path:
    """A lab of 5 events in a folder nobody may write, the key readable by the test user.

    ``wal``: "none" (closed cleanly: lab.db alone), "live" (a writer killed with its WAL
    and shared-memory file left), "bare" (the WAL left, its shared-memory file gone)."""
    key_dir = shared_dir / "keys"
    monkeypatch.setenv("RSILAB_KEY_DIR", str(key_dir))
    lab = shared_dir / "lab"
    lab.mkdir(mode=0o755)
    path = new_lab(lab / "lab.db", events=2)
    if wal == "none":
        with SQLiteStore.open(path) as store:
            fill(store, 3)
    else:
        killed = textwrap.dedent(
            """
            import os, signal, sys
            from pathlib import Path
            from rsilab.records import EventDraft
            from rsilab.store import SQLiteStore
            store = SQLiteStore.open(Path(sys.argv[1]))
            store._conn.execute("PRAGMA wal_autocheckpoint = 0")  # keep them in the WAL
            for i in range(3):
                store.commit(EventDraft(actor="w", role="worker", action="test"))
            os.kill(os.getpid(), signal.SIGKILL)
            """
        )
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
        subprocess.run([sys.executable, "-c", killed, str(path)], env=env, check=False)
        assert Path(f"{path}-wal").stat().st_size > 0
        if wal == "bare":
            Path(f"{path}-shm").unlink()
    for item in [key_dir, *key_dir.iterdir()]:
        item.chmod(0o555 if item.is_dir() else 0o444)
    for item in [*lab.iterdir(), lab]:
        item.chmod(0o555 if item.is_dir() else 0o444)
    return path


@pytest.mark.parametrize("wal", ["none", "live", "bare"])
def test_a_read_only_lab_opens_read_only_and_verifies(
    shared_dir: Path, monkeypatch: pytest.MonkeyPatch, wal: str
) -> None:
    path = read_only_lab(shared_dir, monkeypatch, wal)
    before = snapshot(path.parent)
    try:
        if os.geteuid() == 0:  # root ignores file modes: the check needs a user they bind
            proc = run_as_unprivileged(READ_ONLY, str(path))
            output = proc.stdout + proc.stderr
        else:
            proc = subprocess.run(
                [sys.executable, "-c", READ_ONLY, str(path)], capture_output=True, text=True
            )
            output = proc.stdout + proc.stderr
        assert proc.returncode == 0, output
        assert "head 5 ok True complete True" in output
        assert "refused: the lab at" in output and "was opened read-only" in output
        assert snapshot(path.parent) == before
    finally:
        for item in [path.parent, *path.parent.iterdir(), shared_dir / "keys"]:
            item.chmod(0o755 if item.is_dir() else 0o644)


def test_a_read_only_opening_of_an_older_lab_says_it_would_have_to_upgrade(
    tmp_path: Path,
) -> None:
    path = tmp_path / "lab.db"
    build_v1_lab(path)
    before = path.read_bytes()

    with pytest.raises(LabError, match=r"older than this rsilab's .* would write to it"):
        SQLiteStore.open(path, read_only=True)
    assert path.read_bytes() == before


# -- signing on close --------------------------------------------------------------------------


def checkpoint_seqs(path: Path) -> list[int]:
    with closing(sqlite3.connect(path)) as conn:
        return [r[0] for r in conn.execute("SELECT seq FROM checkpoints ORDER BY seq")]


def test_close_signs_the_head(tmp_path: Path) -> None:
    path = tmp_path / "lab.db"
    store = SQLiteStore.open(path, create=True)
    fill(store, 3)
    assert store.checkpoints() == []

    store.close()

    assert checkpoint_seqs(path) == [3]
    watermark = keys.load_watermark(read_meta(path)["lab_id"])
    assert watermark is not None and watermark.seq == 3


def test_close_without_new_commits_signs_nothing(tmp_path: Path) -> None:
    path = new_lab(tmp_path / "lab.db")
    assert checkpoint_seqs(path) == [3]
    SQLiteStore.open(path).close()

    assert checkpoint_seqs(path) == [3]


def test_close_after_a_signed_commit_adds_no_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "lab.db"
    with SQLiteStore.open(path, create=True) as store:
        fill(store, 64, with_records=False)

    assert checkpoint_seqs(path) == [64]


def test_a_signed_lab_whose_key_is_gone_takes_no_unsigned_events(
    tmp_path: Path, isolated_environment: Path
) -> None:
    """Before, the lab went on taking events no checkpoint signed, without a word."""
    path = new_lab(tmp_path / "lab.db")
    lab_id = read_meta(path)["lab_id"]
    key = isolated_environment / f"{lab_id}.key"
    saved = key.read_text()
    key.unlink()
    with SQLiteStore.open(path) as store:
        head = store.head()
        with pytest.raises(LabError, match=f"the ledger key of lab {lab_id} is missing at") as e:
            fill(store, 1, with_records=False)
        assert "nothing was written" in e.value.message and store.head() == head
        report = verify_store(store)  # reading needs no key: verify says what it could not check
    assert not report.ok or report.warnings
    key.write_text(saved[:5])
    with SQLiteStore.open(path) as store, pytest.raises(LabError, match="is damaged at"):
        fill(store, 1, with_records=False)
    key.write_text("ab" * 32)  # a key, but not this lab's
    with SQLiteStore.open(path) as store, pytest.raises(LabError, match="does not sign"):
        fill(store, 1, with_records=False)
    key.write_text(saved)
    with SQLiteStore.open(path) as store:
        fill(store, 1, with_records=False)
        assert store.head()[0] == head[0] + 1


def test_a_ledger_put_back_to_an_older_copy_takes_no_new_events(tmp_path: Path) -> None:
    """An older lab.db put back: the next run appended past the watermark and verify passed.
    Now the first write refuses it, and so does a ledger replaced by another of the same
    length."""
    path = new_lab(tmp_path / "lab.db")
    with SQLiteStore.open(path) as store:
        fill(store, 4, with_records=False)
        store.checkpoint_now()
    old = tmp_path / "old.db"
    shutil.copy(path, old)
    with SQLiteStore.open(path) as store:
        fill(store, 70, with_records=False)  # past a checkpoint: the watermark moves on
        store.checkpoint_now()
    shutil.copy(old, path)
    for extra in ("-wal", "-shm"):
        Path(f"{path}{extra}").unlink(missing_ok=True)
    with SQLiteStore.open(path) as store:
        head = store.head()
        with pytest.raises(LabError, match="events were removed") as caught:
            fill(store, 1, with_records=False)
        assert store.head() == head and "restore the lab" in caught.value.hint


def test_event_draft_round_trips_through_sqlite(tmp_path: Path) -> None:
    with SQLiteStore.open(tmp_path / "lab.db", create=True) as store:
        sent = EventDraft(
            actor="w1", role="worker", action="tool_call", tool="run", detail='é ✓ "quoted"'
        )
        event = store.commit(sent)
        assert store.events() == [event]
        assert event.model_dump(include=set(EventDraft.model_fields)) == sent.model_dump()


def test_v1_lab_with_a_malformed_event_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "lab.db"
    build_v1_lab(path)
    with closing(sqlite3.connect(path, isolation_level=None)) as raw:
        raw.execute("UPDATE events SET body = 'not json' WHERE seq = 2")

    def dump() -> list[tuple[object, ...]]:
        with closing(sqlite3.connect(path)) as raw:
            return list(raw.execute("SELECT * FROM events ORDER BY seq")) + list(
                raw.execute("SELECT * FROM records ORDER BY id")
            )

    before = dump()
    with pytest.raises(LabError, match="could not be upgraded"):
        SQLiteStore.open(path)
    assert dump() == before  # the migration was rolled back
    assert read_meta(path)["schema_version"] == "1"
    assert "event_records" not in tables(path)


def test_unwritable_key_folder_gives_lab_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("RSILAB_KEY_DIR", str(blocker / "keys"))
    with pytest.raises(LabError, match="ledger key") as info:
        SQLiteStore.open(tmp_path / "lab.db", create=True)
    assert "RSILAB_KEY_DIR" in info.value.hint


def test_an_experiments_records_are_found_through_an_index(tmp_path: Path) -> None:
    path = tmp_path / "lab.db"
    with closing(SQLiteStore.open(path, create=True)) as store:
        plan = store._conn.execute(  # what SQLiteStore.query runs for fields={"subject_id": ...}
            "EXPLAIN QUERY PLAN SELECT kind, body FROM records WHERE kind = ? "
            "AND json_extract(body, '$.subject_id') = ?",
            ("evaluation", "exp-1"),
        ).fetchall()
        assert "records_subject_id" in str(plan)
    # a lab made before the indexes existed gets them when it is opened, version unchanged
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("DROP INDEX records_subject_id")
        conn.commit()
    assert "records_subject_id" not in _indexes(path)
    with closing(SQLiteStore.open(path)) as store:
        assert store.query(fields={"subject_id": "exp-1"}) == []
    assert {"records_subject_id", "records_experiment_id"} <= _indexes(path)
    assert read_meta(path)["schema_version"] == str(SCHEMA_VERSION)


def _indexes(path: Path) -> set[str]:
    with closing(sqlite3.connect(path)) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}


@pytest.mark.parametrize("left", ["empty file", "database without tables"])
def test_an_init_cut_short_is_named_and_init_again_replaces_it(tmp_path: Path, left: str) -> None:
    """A killed `rsilab init` left lab.db that nothing could use and init refused to replace."""
    path = tmp_path / "lab.db"
    if left == "empty file":
        path.write_bytes(b"")
    else:
        with closing(sqlite3.connect(path)) as conn:
            conn.execute("PRAGMA journal_mode = WAL")
    with pytest.raises(LabError, match="empty database, not yet a lab") as caught:
        SQLiteStore.open(path)
    assert "run `rsilab init` again" in caught.value.hint
    with closing(SQLiteStore.open(path, create=True)) as store:
        fill(store, 2, with_records=False)
    with closing(SQLiteStore.open(path)) as store:
        assert store.head()[0] == 2


def test_init_never_replaces_a_database_that_holds_a_table(tmp_path: Path) -> None:
    path = tmp_path / "lab.db"
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE mine (x)")
    with pytest.raises(LabError, match="a lab already exists"):
        SQLiteStore.open(path, create=True)
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("mine",)]


def _remove(db: Path) -> None:
    db.unlink()


def _replace_by_a_copy(db: Path) -> None:
    shutil.copy(db, db.with_name("copy.db"))
    os.replace(db.with_name("copy.db"), db)


def _move_the_folder(db: Path) -> None:
    db.parent.rename(db.parent.with_name("moved"))


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (_remove, "was removed or moved"),
        (_replace_by_a_copy, "was replaced by another file"),
        (_move_the_folder, "was removed or moved"),
    ],
)
def test_a_database_no_longer_at_the_labs_path_is_not_written(
    tmp_path: Path, change: Callable[[Path], None], said: str
) -> None:
    """lab.db removed, replaced (here by a copy of itself) or moved away with its folder
    while the store has it open: the next commit is refused with one line naming the path,
    nothing more is written, and what the store had recorded is saved beside the path."""
    db = tmp_path / "lab" / "lab.db"
    db.parent.mkdir()
    store = SQLiteStore.open(db, create=True)
    try:
        fill(store, 5)
        head = store.head()
        change(db)
        with pytest.raises(LabError) as caught:
            store.commit(draft("into a file nobody will find"))
        message = caught.value.message
        assert message.startswith(f"the lab database {db} {said}")
        assert "nothing more was written" in message
        with pytest.raises(LabError) as again:
            store.commit(draft("again"))
        assert again.value.message == message  # one copy saved, the same line every time
        assert store.head() == head
    finally:
        store.close()
    if not db.parent.exists():  # moved with its folder: what was recorded went with it
        assert "could not be saved beside it (its folder is gone" in message
        saved = [tmp_path / "moved" / "lab.db"]
    else:
        saved = sorted(db.parent.glob("lab.db.orphaned-*"))
        assert len(saved) == 1 and f"is saved in {saved[0]}" in message
    with closing(sqlite3.connect(saved[0])) as copy:
        assert copy.execute("SELECT count(*), max(seq) FROM events").fetchone() == (5, 5)
    if db.exists():  # the copy put in its place is left as it was
        with closing(sqlite3.connect(db)) as there:
            assert there.execute("SELECT count(*) FROM events").fetchone()[0] <= 5
