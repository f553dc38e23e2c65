"""PostgreSQL-specific behaviour: the lab URL, durability, the fork-proof table, migrations,
and commits across a server restart or a connection cut mid-commit (the chaos cases)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest

from rsilab.errors import LabError, UserError
from rsilab.records import SCHEMA_VERSION, Finding
from rsilab.store import Lab, resolve_lab_path, verify_store
from rsilab.store import postgres as postgres_module
from rsilab.store._pg_url import parse_pg_url
from rsilab.store.backup import backup_lab
from rsilab.store.postgres import PostgresStore
from tests.store.cutting_proxy import CuttingProxy
from tests.store.helpers import draft, fill, finding
from tests.store.pg_server import PORT, SUPERUSER, PgServer


def sql(server: PgServer, url: str, statement: str) -> list[tuple[object, ...]]:
    """Run one statement in the lab's database, outside the store (autocommit)."""
    database = parse_pg_url(url).url.database
    with psycopg.connect(
        host=str(server.folder), port=PORT, user=SUPERUSER, dbname=database, autocommit=True
    ) as conn:
        cursor = conn.execute(statement.encode())
        return cursor.fetchall() if cursor.description else []


# -- the URL -----------------------------------------------------------------------------------


def test_url_without_artifacts_is_refused_in_one_line() -> None:
    with pytest.raises(LabError, match="names no artifact folder") as caught:
        Lab.open("postgresql://me@db.example/lab")

    assert "\n" not in caught.value.message
    assert "artifacts=" in (caught.value.hint or "")


def test_url_and_folder_resolve_to_the_artifact_folder(tmp_path: Path) -> None:
    url = f"postgresql://me:secret@db.example:6543/lab?sslmode=require&artifacts={tmp_path}"

    location = parse_pg_url(url)

    assert resolve_lab_path(url) == tmp_path
    assert resolve_lab_path(tmp_path / "lab") == tmp_path / "lab"
    assert (location.url.drivername, location.url.host, location.url.port) == (
        "postgresql+psycopg",
        "db.example",
        6543,
    )
    assert dict(location.url.query) == {"sslmode": "require"}
    assert "secret" not in location.shown
    # A Path made from the URL (as --lab DIR gives it) has lost a slash; it still parses.
    assert parse_pg_url(Path(url)).url == location.url


def test_lab_init_and_open_through_a_url(pg_lab_url: str) -> None:
    with Lab.init(pg_lab_url) as lab:
        lab_id = lab.store.lab_id
        assert isinstance(lab.store, PostgresStore)
        sha = lab.artifacts.put_bytes(b"bytes kept beside the database").sha256

    with Lab.open(pg_lab_url) as lab:
        assert lab.store.lab_id == lab_id
        assert [e.action for e in lab.store.events()] == ["lab_created"]
        assert lab.artifacts.read_bytes(sha) == b"bytes kept beside the database"
        assert verify_store(lab.store).ok

    with pytest.raises(LabError, match="already exists"):
        Lab.init(pg_lab_url)


def test_backup_refuses_a_postgres_lab_and_writes_nothing(pg_lab_url: str, tmp_path: Path) -> None:
    with Lab.init(pg_lab_url) as lab, pytest.raises(UserError, match="copies SQLite labs"):
        backup_lab(lab, tmp_path / "backup")

    assert not (tmp_path / "backup").exists()
    assert not (lab.path / "lab.db").exists()


def test_database_without_a_lab_is_refused(pg_server: PgServer, tmp_path: Path) -> None:
    url = pg_server.lab_url(pg_server.database(), tmp_path)

    with pytest.raises(LabError, match="holds no rsilab lab"):
        PostgresStore.open(url)


# -- durability and the fork-proof table -------------------------------------------------------


def test_synchronous_commit_off_is_refused(pg_server: PgServer, pg_lab_url: str) -> None:
    PostgresStore.open(pg_lab_url, create=True).close()
    database = parse_pg_url(pg_lab_url).url.database
    pg_server.admin(f"ALTER DATABASE {database} SET synchronous_commit = off")

    with pytest.raises(LabError) as caught:
        PostgresStore.open(pg_lab_url)

    assert "synchronous_commit=off" in caught.value.message
    assert "\n" not in caught.value.message
    # a reading command commits nothing such a server could lose: it reads the lab
    with PostgresStore.open(pg_lab_url, read_only=True) as store:
        assert [e.action for e in store.events()] == []


def test_a_server_without_fsync_is_refused_unless_said_to_be_throwaway(
    pg_lab_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The suite's server runs with fsync=off (a throwaway one, as the suite declares)."""
    PostgresStore.open(pg_lab_url, create=True).close()
    monkeypatch.delenv("RSILAB_PG_THROWAWAY")
    with pytest.raises(LabError) as caught:
        PostgresStore.open(pg_lab_url)
    assert "runs with fsync=off" in caught.value.message
    assert "fsync = on" in caught.value.hint and "RSILAB_PG_THROWAWAY=1" in caught.value.hint
    monkeypatch.setenv("RSILAB_PG_THROWAWAY", "1")
    PostgresStore.open(pg_lab_url).close()


def test_the_table_refuses_a_fork_and_a_repeated_event_id(
    pg_server: PgServer, pg_lab_url: str
) -> None:
    with PostgresStore.open(pg_lab_url, create=True) as store:
        fill(store, 3)
    first = sql(pg_server, pg_lab_url, "SELECT prev_hash, event_id FROM events WHERE seq = 2")[0]
    insert = "INSERT INTO events (seq, hash, prev_hash, event_id, body) VALUES ({})"

    # A second event after event 1 (same previous hash), as a writer without the lock would.
    with pytest.raises(psycopg.errors.UniqueViolation, match="prev_hash"):
        sql(pg_server, pg_lab_url, insert.format(f"4, 'h', '{first[0]}', 'fresh', '{{}}'"))
    with pytest.raises(psycopg.errors.UniqueViolation, match="event_id"):
        sql(pg_server, pg_lab_url, insert.format(f"4, 'h', 'other', '{first[1]}', '{{}}'"))
    with pytest.raises(psycopg.errors.UniqueViolation, match="events_pkey"):
        sql(pg_server, pg_lab_url, insert.format("3, 'h', 'other', 'fresh', '{}'"))


def test_newer_schema_is_refused_untouched(pg_server: PgServer, pg_lab_url: str) -> None:
    PostgresStore.open(pg_lab_url, create=True).close()
    newer = SCHEMA_VERSION + 1
    sql(pg_server, pg_lab_url, f"UPDATE meta SET value = '{newer}' WHERE key = 'schema_version'")

    with pytest.raises(LabError, match=f"schema version {newer}, newer"):
        PostgresStore.open(pg_lab_url)

    stored = sql(pg_server, pg_lab_url, "SELECT value FROM meta WHERE key = 'schema_version'")
    assert stored == [(str(newer),)]


def test_a_new_lab_stores_the_current_schema_version(pg_server: PgServer, pg_lab_url: str) -> None:
    PostgresStore.open(pg_lab_url, create=True).close()

    assert sql(pg_server, pg_lab_url, "SELECT value FROM meta WHERE key = 'schema_version'") == [
        ("3",)
    ]


# -- chaos: a restart, a cut connection --------------------------------------------------------


def test_commit_after_a_server_restart_reconnects(restarted: PgServer, pg_lab_url: str) -> None:
    with PostgresStore.open(pg_lab_url, create=True) as store:
        store.commit(draft("before the restart"), [finding("one")])

        restarted.restart()
        event = store.commit(draft("after the restart"), [finding("two")])

        assert event.seq == 2
        assert [e.detail for e in store.events()] == ["before the restart", "after the restart"]
        report = verify_store(store)
    assert report.ok, report.problems


def test_commit_while_the_server_is_down_fails_clearly_and_writes_nothing(
    restarted: PgServer, pg_lab_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres_module, "RECONNECT_S", 1.0)
    with PostgresStore.open(pg_lab_url, create=True) as store:
        store.commit(draft("kept"))
        restarted.stop()

        with pytest.raises(LabError, match="cannot reach the PostgreSQL server") as caught:
            store.commit(draft("never written"))

        assert "outcome is unknown" in caught.value.message
        restarted.start()
        assert [e.detail for e in store.events()] == ["kept"]


@pytest.mark.parametrize(
    ("marker", "deliver"),
    # The simple-query message's text ends in NUL: "COMMIT\x00" is no "READ COMMITTED".
    [(b"COMMIT\x00", True), (b"INSERT INTO events", False)],
    ids=["cut-after-commit-sent", "cut-before-the-event"],
)
def test_a_commit_cut_mid_way_lands_exactly_once(
    pg_server: PgServer, tmp_path: Path, marker: bytes, deliver: bool
) -> None:
    proxy = CuttingProxy(pg_server.folder / f".s.PGSQL.{PORT}")
    url = f"postgresql://{SUPERUSER}@127.0.0.1:{proxy.port}/{pg_server.database()}"
    try:
        with PostgresStore.open(f"{url}?artifacts={tmp_path}", create=True) as store:
            store.commit(draft("first"))
            record = finding("written once")
            proxy.arm(marker, deliver=deliver)

            event = store.commit(draft("cut"), [record])

            assert proxy.cuts == 1
            assert (event.seq, record.rev) == (2, 1)
            assert [e.detail for e in store.events()] == ["first", "cut"]
            assert [f.claim for f in store.query_as(Finding)] == ["written once"]
            report = verify_store(store)
    finally:
        proxy.close()
    assert report.ok, report.problems


@pytest.mark.parametrize("made_again", ["another lab", "an empty database"])
def test_a_lab_database_dropped_and_made_again_is_not_written(
    pg_server: PgServer, tmp_path: Path, made_again: str
) -> None:
    """A lab's database is dropped while a process has it open and a database of the same
    name made again: the pool would reconnect by name and write into it; the store refuses
    with one line naming the lab, and the new database keeps only what it had."""
    name = pg_server.database()
    url = pg_server.lab_url(name, tmp_path / "first")
    with PostgresStore.open(url, create=True) as store:
        store.commit(draft("recorded before the drop"))
        pg_server.admin(f"DROP DATABASE {name} WITH (FORCE)")
        pg_server.admin(f"CREATE DATABASE {name}")
        if made_again == "another lab":
            with PostgresStore.open(url, create=True) as other:
                other.commit(draft("the other lab's own"))
        with pytest.raises(LabError) as caught:
            store.commit(draft("must not land in another database"))
        assert f"the database of lab {store.lab_id}" in caught.value.message
        assert "dropped and made again" in caught.value.message
        with pytest.raises(LabError):
            store.head()  # reads refuse it too
    if made_again == "another lab":
        with PostgresStore.open(url) as other:
            assert [e.detail for e in other.events()] == ["the other lab's own"]


def test_a_dropped_lab_database_fails_a_commit(pg_server: PgServer, tmp_path: Path) -> None:
    name = pg_server.database()
    with PostgresStore.open(pg_server.lab_url(name, tmp_path / "lab"), create=True) as store:
        store.commit(draft("recorded"))
        pg_server.admin(f"DROP DATABASE {name} WITH (FORCE)")
        with pytest.raises(LabError, match="does not exist"):
            store.commit(draft("nowhere to go"))


# -- one reconnect window for the whole store --------------------------------------------------


def watch_connects(store: PostgresStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The ``connect_timeout`` of every connection ``store`` tries to make from now on, in
    order (the driver's connect is wrapped to note it, then called as it was)."""
    timeouts: list[int] = []
    dialect = store.engine.dialect
    connect = dialect.connect

    def noted(*cargs: Any, **cparams: Any) -> Any:
        timeouts.append(int(cparams["connect_timeout"]))
        return connect(*cargs, **cparams)

    monkeypatch.setattr(dialect, "connect", noted)
    return timeouts


def test_a_server_that_stays_down_costs_one_window_for_every_call_together(
    restarted: PgServer, pg_lab_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first call waits out the window, trying again and again, each try no longer than
    the window has left; every later call (reads, a commit, a checkpoint) tries once, does
    not wait, and says the same line."""
    monkeypatch.setattr(postgres_module, "RECONNECT_S", 3.0)
    with PostgresStore.open(pg_lab_url, create=True) as store:
        store.commit(draft("kept"))
        made = watch_connects(store, monkeypatch)
        restarted.stop()

        with pytest.raises(LabError) as first:
            store.head()
        assert "cannot reach the PostgreSQL server" in first.value.message
        assert "\n" not in first.value.message
        assert len(made) > 2  # it waited for the server, trying again
        assert made[0] == 10  # the server was there last time: the whole connect timeout
        assert all(2 <= t <= 3 for t in made[1:])  # then at most the 3 s window's rest

        for call in (
            store.events,
            store.head,
            lambda: store.query(kind="finding"),
            store.checkpoint_now,
            lambda: store.commit(draft("never written")),
        ):
            before = len(made)
            with pytest.raises(LabError) as later:
                call()
            assert later.value.message.startswith(first.value.message)
            assert len(made) - before <= 1  # one try, no second wait
        restarted.start()
        assert [e.detail for e in store.events()] == ["kept"]  # picked up at once, unchanged


def test_a_success_gives_the_next_outage_a_window_of_its_own(
    restarted: PgServer, pg_lab_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres_module, "RECONNECT_S", 1.0)
    with PostgresStore.open(pg_lab_url, create=True) as store:
        made = watch_connects(store, monkeypatch)
        restarted.stop()
        with pytest.raises(LabError):
            store.head()
        restarted.start()
        assert store.commit(draft("between the outages")).seq == 1

        restarted.stop()
        before = len(made)
        with pytest.raises(LabError, match="cannot reach the PostgreSQL server"):
            store.head()
        assert len(made) - before > 2  # waited again: the success ended the first outage
        restarted.start()
        assert [e.detail for e in store.events()] == ["between the outages"]


def test_a_server_back_within_the_window_takes_the_waiting_commit_once(
    restarted: PgServer, pg_lab_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server is started again while a commit waits for it (after the commit has tried
    and failed at least twice): the commit lands once, and the store goes on."""
    with PostgresStore.open(pg_lab_url, create=True) as store:
        store.commit(draft("before"))
        made = watch_connects(store, monkeypatch)
        restarted.stop()
        started, done = threading.Event(), threading.Event()

        def start_when_waited() -> None:
            while len(made) < 2 and not done.is_set():
                done.wait(0.01)
            if not done.is_set():
                restarted.start()
                started.set()

        starter = threading.Thread(target=start_when_waited)
        starter.start()
        try:
            event_ = store.commit(draft("while it restarted"), [finding("one")])
        finally:
            done.set()
            starter.join()
        assert started.is_set()  # the commit was still waiting when the server came back

        assert event_.seq == 2
        store.commit(draft("after"))
        assert [e.detail for e in store.events()] == ["before", "while it restarted", "after"]
        report = verify_store(store)
    assert report.ok, report.problems


def test_a_silent_server_is_tried_for_one_window_then_refused_at_once(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that accepts connections and never answers (a dead host or network path):
    the first call gives up within its window, later calls do not even try."""
    monkeypatch.setattr(postgres_module, "RECONNECT_S", 3.0)
    proxy = CuttingProxy(pg_server.folder / f".s.PGSQL.{PORT}")
    url = f"postgresql://{SUPERUSER}@127.0.0.1:{proxy.port}/{pg_server.database()}"
    try:
        with PostgresStore.open(f"{url}?artifacts={tmp_path}", create=True) as store:
            store.commit(draft("kept"))
            proxy.stall()
            before = proxy.accepted

            with pytest.raises(LabError) as first:
                store.head()
            assert "connection timeout expired" in first.value.message
            tried = proxy.accepted - before
            assert tried >= 1

            for call in (store.events, lambda: store.commit(draft("never sent")), store.head):
                with pytest.raises(LabError) as later:
                    call()
                assert later.value.message == first.value.message
            assert proxy.accepted - before == tried  # refused without a new connection
    finally:
        proxy.close()


# -- read-only opens ---------------------------------------------------------------------------


def test_a_read_only_open_reads_and_the_server_refuses_every_write(
    pg_server: PgServer, pg_lab_url: str
) -> None:
    """Commands that only read (verify, log, show, report) open the lab read-only: rsilab
    refuses a commit, and the server refuses a write that does not go through commit (its
    connections' transactions are read-only), with a line that says why."""
    with Lab.init(pg_lab_url) as lab:
        fill(lab.store, 3)
        folder = lab.path
    folder.chmod(0o755)  # a folder another user may list: a reading command leaves it so
    signed = sql(pg_server, pg_lab_url, "SELECT count(*) FROM checkpoints")

    with Lab.open(pg_lab_url, read_only=True) as lab:
        assert len(lab.store.events()) == 4  # lab_created and the three written
        assert verify_store(lab.store).ok
        with pytest.raises(LabError, match="opened read-only; nothing was written"):
            lab.store.commit(draft())
        assert isinstance(lab.store, PostgresStore)
        with pytest.raises(Exception) as info, lab.store.engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO meta VALUES ('x', 'y')")
        assert "read-only transaction" in str(info.value)

    assert sql(pg_server, pg_lab_url, "SELECT count(*) FROM checkpoints") == signed
    assert sql(pg_server, pg_lab_url, "SELECT value FROM meta WHERE key = 'x'") == []
    assert folder.stat().st_mode & 0o777 == 0o755
    with Lab.open(pg_lab_url) as lab:  # a writing open is as before
        lab.store.commit(draft())


def test_a_read_only_open_of_an_older_schema_is_refused_without_upgrading(
    pg_server: PgServer, pg_lab_url: str
) -> None:
    PostgresStore.open(pg_lab_url, create=True).close()
    older = SCHEMA_VERSION - 1
    sql(pg_server, pg_lab_url, f"UPDATE meta SET value = '{older}' WHERE key = 'schema_version'")

    with pytest.raises(LabError, match=f"schema version {older}, older .* would write to it"):
        PostgresStore.open(pg_lab_url, read_only=True)

    stored = sql(pg_server, pg_lab_url, "SELECT value FROM meta WHERE key = 'schema_version'")
    assert stored == [(str(older),)]
