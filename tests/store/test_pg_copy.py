"""``rsilab lab migrate SRC DEST``: a SQLite lab copied into PostgreSQL verifies, through the
command line (typer's CliRunner), with the same key, chain and checkpoints."""

from __future__ import annotations

from pathlib import Path

from rsilab.records import Artifact
from rsilab.store import Lab
from rsilab.store.base import CHECKPOINT_INTERVAL
from rsilab.store.postgres import PostgresStore
from tests.cli.helpers import explain, rsilab
from tests.store.helpers import draft, fill
from tests.store.pg_server import PgServer


def sqlite_lab(folder: Path) -> tuple[str, str]:
    """A closed SQLite lab past its first checkpoint, with a stored blob a record names;
    its lab id and the blob's address."""
    with Lab.init(folder) as lab:
        fill(lab.store, CHECKPOINT_INTERVAL + 5)
        blob = lab.artifacts.put_bytes(b"model weights, say")
        lab.store.commit(
            draft("stored a blob"),
            [Artifact(sha256=blob.sha256, artifact_kind="file", size=blob.size)],
        )
        return lab.store.lab_id, blob.sha256


def test_migrate_copies_a_sqlite_lab_that_then_verifies(
    pg_server: PgServer, tmp_path: Path
) -> None:
    lab_id, sha = sqlite_lab(tmp_path / "src")
    dest = pg_server.lab_url(pg_server.database(), tmp_path / "copy")

    migrated = rsilab("lab", "migrate", tmp_path / "src", dest)

    assert migrated.exit_code == 0, explain(migrated)
    # 1 lab_created + 69 filled + 1 blob event; 46 findings + 1 artifact; 1 interval + close.
    assert "71 events, 47 records, 2 checkpoints" in migrated.stdout
    assert "the copy verifies" in migrated.stdout
    verified = rsilab("verify", "--lab", dest)
    assert verified.exit_code == 0, explain(verified)
    with Lab.open(tmp_path / "src") as source, Lab.open(dest) as copy:
        assert isinstance(copy.store, PostgresStore)
        assert copy.store.lab_id == lab_id
        assert list(copy.store.stored_events()) == list(source.store.stored_events())
        by_id = {r.id: r for r in source.store.stored_records()}
        assert {r.id: r for r in copy.store.stored_records()} == by_id
        assert [r.id for r in copy.store.query()] == [r.id for r in source.store.query()]
        assert copy.store.checkpoints() == source.store.checkpoints()
        assert copy.artifacts.read_bytes(sha) == b"model weights, say"
        assert not (copy.path / "lab.db").exists()
        # The copy is a working lab: the next event follows the copied head.
        assert copy.store.commit(draft("after the move")).seq == 72


def test_migrate_into_a_folder_that_is_not_empty_is_refused(
    pg_server: PgServer, tmp_path: Path
) -> None:
    sqlite_lab(tmp_path / "src")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "something").write_text("x")
    database = pg_server.database()

    result = rsilab(
        "lab", "migrate", tmp_path / "src", pg_server.lab_url(database, tmp_path / "busy")
    )

    assert result.exit_code == 2, explain(result)
    assert "already exists and is not empty" in result.stderr
    with PostgresStore.open(pg_server.lab_url(database, tmp_path / "x"), create=True) as fresh:
        assert fresh.head()[0] == 0  # the database was left untouched: still no lab in it
