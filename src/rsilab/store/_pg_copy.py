"""Copy a SQLite lab into PostgreSQL (``rsilab lab migrate``): the ledger, the records, the
checkpoints and the artifact folder, byte for byte, keeping the lab id so that the same key
and watermark verify the copy.

The copy is not a replay: each event's stored text, hash and sequence are inserted as they
are, so the copy's chain is the original's and ``rsilab verify`` checks one against the same
signed checkpoints. Stop writers to the source while it runs (a record written after its
events were read would be caught by the verification of the copy).
"""

from __future__ import annotations

import contextlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from rsilab.errors import LabError, UserError
from rsilab.store._pg_errors import explain
from rsilab.store._pg_url import PgLocation, is_pg_url, parse_pg_url
from rsilab.store.artifacts import ArtifactStore
from rsilab.store.lab import DB_NAME, Lab
from rsilab.store.ledger import VerifyReport
from rsilab.store.postgres import PostgresStore
from rsilab.store.verify import verify_store

LEFT_OUT = frozenset({"tmp", "locks", "workspaces", ".write-test"})
"""Names at the top of a lab folder that are not copied: scratch, locks, job workspaces."""


@dataclass
class CopyReport:
    """What :func:`copy_to_postgres` copied, and the verification of the copy."""

    lab_id: str
    events: int = 0
    records: int = 0
    checkpoints: int = 0
    files: int = 0
    verify: VerifyReport = field(default_factory=VerifyReport)


def copy_to_postgres(source: Lab, dest: str | Path) -> CopyReport:
    """Copy the opened SQLite lab ``source`` into the empty database and folder ``dest`` (a
    PostgreSQL lab URL) and verify the copy (artifacts included).

    Raises UserError: ``dest`` is no PostgreSQL URL, or its folder is not empty; LabError:
    the database cannot be reached or already holds a lab. The source is only read.
    """
    where = _check_dest(dest)
    report = CopyReport(source.store.lab_id)
    with PostgresStore.open(where, create=True, lab_id=report.lab_id) as target:
        try:
            with target.engine.begin() as conn:
                _copy_ledger(source, conn, report)
        except SQLAlchemyError as exc:
            _forget(target)  # the copy rolled back: leave no empty lab that blocks a rerun
            raise explain(exc, where.shown) from exc
        report.files = _copy_folder(source.path, where.folder)
        report.verify = verify_store(target, artifacts=ArtifactStore(where.folder))
    return report


def _forget(target: PostgresStore) -> None:
    """Drop the tables of the empty lab just made (best effort: the error that led here is
    the one to report)."""
    with contextlib.suppress(SQLAlchemyError), target.engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE meta, records, events, event_records, checkpoints"))


def _check_dest(dest: str | Path) -> PgLocation:
    if not is_pg_url(dest):
        raise UserError(
            f"{dest} is not a PostgreSQL lab URL",
            "write DEST as postgresql://USER@HOST/DB?artifacts=/a/new/folder",
        )
    where = parse_pg_url(dest)
    if where.folder.exists() and (not where.folder.is_dir() or any(where.folder.iterdir())):
        raise UserError(
            f"the artifact folder {where.folder} already exists and is not empty",
            "name a new (or empty) folder in DEST's artifacts= parameter",
        )
    return where


def _copy_ledger(source: Lab, conn: sa.Connection, report: CopyReport) -> None:
    # Lab.init's "lab_created" event in the new database would break the copied chain: only
    # PostgresStore.open ran, which writes no event, so the tables are empty here.
    events, links = [], []
    for stored in source.store.stored_events():
        body = json.loads(stored.text)
        events.append({
            "seq": stored.seq, "hash": stored.hash, "prev": body["prev_hash"],
            "eid": f"copied-{stored.seq}", "cid": body.get("campaign_id"), "body": stored.text,
        })  # fmt: skip
        links += [{"r": ref["id"], "s": stored.seq} for ref in body.get("records", [])]
    stored_records = {r.id: r for r in source.store.stored_records()}
    # In the source's creation order, which queries keep (``pos`` numbers them in the copy).
    order = [r.id for r in source.store.query()]
    records = [stored_records[rid] for rid in order if rid in stored_records]
    records += [r for rid, r in stored_records.items() if rid not in set(order)]
    if events:
        conn.execute(
            sa.text(
                "INSERT INTO events (seq, hash, prev_hash, event_id, campaign_id, body) "
                "VALUES (:seq, :hash, :prev, :eid, :cid, :body)"
            ),
            events,
        )
    if links:
        conn.execute(sa.text("INSERT INTO event_records VALUES (:r, :s)"), links)
    if records:
        conn.execute(
            sa.text(
                "INSERT INTO records (id, kind, campaign_id, rev, body) "
                "VALUES (:id, :kind, :cid, :rev, :body)"
            ),
            [{"id": r.id, "kind": r.kind, "cid": json.loads(r.text).get("campaign_id"),
              "rev": r.rev, "body": r.text} for r in records],
        )  # fmt: skip
    checkpoints = source.store.checkpoints()
    if checkpoints:
        conn.execute(
            sa.text("INSERT INTO checkpoints VALUES (:seq, :head, :mac, :at)"),
            [{"seq": c.seq, "head": c.head_hash, "mac": c.mac, "at": c.at} for c in checkpoints],
        )
    report.events, report.records, report.checkpoints = len(events), len(records), len(checkpoints)


def _copy_folder(source: Path, target: Path) -> int:
    """Copy the lab folder's files (blobs, the task secret, settings) into ``target``, leaving
    out the SQLite database and :data:`LEFT_OUT`; the number of files copied."""

    def ignored(folder: str, names: list[str]) -> set[str]:
        if Path(folder) != source:
            return set()
        return {n for n in names if n in LEFT_OUT or n == DB_NAME or n.startswith(f"{DB_NAME}")}

    try:
        shutil.copytree(source, target, symlinks=True, ignore=ignored, dirs_exist_ok=True)
    except (OSError, shutil.Error) as exc:
        raise LabError(
            f"cannot copy the lab folder {source} to {target}: {exc}",
            "check that the folder is writable and has room, then migrate into a new database",
        ) from exc
    target.chmod(0o700)
    return sum(1 for p in target.rglob("*") if p.is_file())
