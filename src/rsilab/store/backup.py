"""A consistent copy of a lab, taken while it may be in use, and verified.

Layout of a backup folder ``DEST``:

- ``DEST/lab/``: the lab folder: ``lab.db`` copied with SQLite's online backup API (one
  consistent snapshot, even while other processes write), then the blob folder, the task
  secret, ``rsilab.toml`` and the lab's other files. Left out: SQLite's ``-wal``/``-shm``
  files (the snapshot holds their content), migration copies (``lab.db.v*.bak``), the
  artifact store's in-progress ``tmp/``, the ``locks/`` of running processes and, unless
  asked for, ``workspaces/`` (agents' scratch folders: what counts is in the records and blobs);
- ``DEST/keys/``: the ledger key of the lab (unless left out, or taken from
  ``RSILAB_LEDGER_KEY``, which has no file) and its watermark as of the snapshot. Keep this
  folder apart from the lab copy: whoever holds the key can re-sign an altered ledger;
- ``DEST/backup.json``: what was copied, from where and when, and the verification's outcome.

The snapshot is taken after the database, signing its head first where the key is at hand, so
the copy's ledger ends in a signed checkpoint. Blobs are copied after the snapshot: blobs are
written before the records that name them and never change, so every blob the snapshot names
is there (a garbage collection running at the same moment can remove one; verification then
says which). Finally the copy is verified as ``rsilab verify --deep`` would, against the
watermark read before the snapshot.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from rsilab.errors import LabDamaged, LabError, RsilabError, UserError
from rsilab.records import utc_now
from rsilab.store import keys
from rsilab.store._sqlite_errors import BUSY_TIMEOUT_S, explain
from rsilab.store.artifacts import ArtifactStore
from rsilab.store.lab import DB_NAME, Lab
from rsilab.store.ledger import Checkpoint, VerifyReport
from rsilab.store.sqlite import SQLiteStore
from rsilab.store.verify import verify_store

LAB_DIR = "lab"
KEYS_DIR = "keys"
MANIFEST = "backup.json"
SKIPPED = frozenset({"tmp", "locks", "workspaces", ".write-test"})
"""Names at the top of a lab folder that are never copied (see the module)."""


class BackupFailed(RsilabError):
    """The copy could not be made (a file unreadable, the destination full); what was copied
    so far is removed."""


@dataclass
class BackupReport:
    """What :func:`backup_lab` copied and how the copy verified."""

    dest: Path
    lab_id: str
    files: int = 0
    bytes: int = 0
    key_copied: bool = False
    notes: list[str] = field(default_factory=list)
    verify: VerifyReport = field(default_factory=VerifyReport)

    @property
    def lab_copy(self) -> Path:
        return self.dest / LAB_DIR

    @property
    def key_copy(self) -> Path:
        return self.dest / KEYS_DIR


def backup_lab(
    lab: Lab,
    dest: Path,
    *,
    workspaces: bool = False,
    key: bool = True,
    deep: bool = True,
) -> BackupReport:
    """Copy ``lab`` to ``dest`` (see the module) and verify the copy; the report says how it
    went (``report.verify.ok`` False: the copy must not be trusted; it is kept to look at).

    Raises:
        UserError: ``dest`` exists and is not an empty folder, or lies inside the lab; the
            lab is not an SQLite lab.
        LabDamaged: the lab's database cannot be read to copy it.
        BackupFailed: copying failed (the partial copy is removed).
    """
    dest = Path(dest)
    _check_dest(lab, dest)
    report = BackupReport(dest, lab.store.lab_id)
    made = not dest.exists()
    try:
        dest.mkdir(parents=True, exist_ok=True)
        (dest / LAB_DIR).mkdir(mode=0o700)  # it holds the task secret: as private as the lab
        (dest / KEYS_DIR).mkdir(mode=0o700)
        watermark = _sign_head(lab, report)
        _snapshot(lab.path / DB_NAME, dest / LAB_DIR / DB_NAME)
        _copy_folder(lab.path, dest / LAB_DIR, report, top_skip=_skipped(workspaces))
        the_key = _copy_key_material(lab, dest / KEYS_DIR, watermark, key, report)
    except OSError as exc:
        _remove_partial(dest, made)
        raise BackupFailed(f"cannot back up {lab.path} to {dest}: {exc}") from exc
    except BaseException:
        _remove_partial(dest, made)
        raise
    report.verify = _verify_copy(dest, the_key, deep)
    _write_manifest(lab, report)
    return report


def _check_dest(lab: Lab, dest: Path) -> None:
    if not isinstance(lab.store, SQLiteStore):  # the copy is SQLite's online backup of lab.db
        raise UserError(
            f"rsilab backup copies SQLite labs; the lab at {lab.path} keeps its ledger in "
            "another database",
            "back up a PostgreSQL lab with pg_dump and a copy of its artifact folder",
        )
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise UserError(
            f"{dest} already exists and is not an empty folder; a backup never overwrites",
            "choose a new folder (it is created), or an empty one",
        )
    if dest.resolve().is_relative_to(lab.path.resolve()):
        raise UserError(f"{dest} is inside the lab {lab.path}", "choose a folder outside the lab")


def _skipped(workspaces: bool) -> frozenset[str]:
    return SKIPPED - {"workspaces"} if workspaces else SKIPPED


def _sign_head(lab: Lab, report: BackupReport) -> Checkpoint | None:
    """Sign the live lab's head (where the key is here and the lab writable), then read the
    watermark: it can only be at or before the snapshot taken next."""
    signer = lab.store
    if isinstance(signer, SQLiteStore):
        try:
            signer.checkpoint_now()
        except LabError as exc:
            report.notes.append(f"the head was not signed before the copy: {exc.message}")
    return keys.load_watermark(lab.store.lab_id)


def _snapshot(source: Path, target: Path) -> None:
    """Copy the database with SQLite's online backup API: one consistent snapshot."""
    src = sqlite3.connect(source, timeout=BUSY_TIMEOUT_S)
    try:
        with contextlib.closing(sqlite3.connect(target)) as dst:
            src.backup(dst)
    except sqlite3.Error as exc:
        raise explain(exc, source, src) from exc
    finally:
        src.close()


def _copy_folder(
    source: Path, target: Path, report: BackupReport, top_skip: frozenset[str]
) -> None:
    """Copy what ``source`` holds into ``target`` (links as links); at the top, names of the
    database and ``top_skip`` are left out. A file gone meanwhile (gc) is skipped."""
    for folder, dirs, files in os.walk(source):
        rel = Path(folder).relative_to(source)
        if rel == Path("."):
            dirs[:] = [d for d in dirs if d not in top_skip]
            files = [f for f in files if f not in top_skip and not _left_out(f)]
        (target / rel).mkdir(exist_ok=True)
        for name in sorted(files) + [d for d in dirs if (Path(folder) / d).is_symlink()]:
            src, dst = Path(folder) / name, target / rel / name
            try:
                if src.is_symlink():
                    dst.symlink_to(os.readlink(src))
                else:
                    shutil.copy2(src, dst)
                    report.bytes += dst.stat().st_size
            except FileNotFoundError:
                continue
            report.files += 1
        dirs[:] = [d for d in dirs if not (Path(folder) / d).is_symlink()]


def _left_out(name: str) -> bool:
    """The database and its companions, and a task secret being written."""
    return name == DB_NAME or name.startswith((f"{DB_NAME}-", f"{DB_NAME}.", ".task-secret-"))


def _copy_key_material(
    lab: Lab,
    folder: Path,
    watermark: Checkpoint | None,
    copy_key: bool,
    report: BackupReport,
) -> bytes | None:
    """Write the watermark (and, with ``copy_key``, the key file) into ``folder``; the key."""
    lab_id = lab.store.lab_id
    the_key = keys.load_key(lab_id)
    if watermark is not None:
        (folder / f"{lab_id}.watermark.json").write_text(json.dumps(watermark.__dict__))
    key_file = keys.key_dir() / f"{lab_id}.key"
    if the_key is None:
        report.notes.append(
            "no ledger key was found here: the copy's checkpoints could not be checked"
        )
    elif os.environ.get("RSILAB_LEDGER_KEY"):
        report.notes.append("the ledger key comes from RSILAB_LEDGER_KEY: keep it; not copied")
    elif copy_key and key_file.is_file():
        fd = os.open(folder / key_file.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(key_file.read_bytes())
        report.key_copied = True
    return the_key


def _verify_copy(dest: Path, key: bytes | None, deep: bool) -> VerifyReport:
    try:
        store = SQLiteStore.open(dest / LAB_DIR / DB_NAME)
    except LabDamaged as exc:
        report = VerifyReport()
        report.fail(None, exc.message)
        return report
    try:
        return verify_store(
            store,
            key,
            artifacts=ArtifactStore(dest / LAB_DIR),
            deep=deep,
            key_dir=dest / KEYS_DIR,
        )
    finally:
        store.close()


def _write_manifest(lab: Lab, report: BackupReport) -> None:
    manifest = {
        "lab_id": report.lab_id,
        "source": str(lab.path.resolve()),
        "made_at": utc_now(),
        "events": report.verify.events,
        "head_hash": report.verify.head_hash,
        "files": report.files,
        "bytes": report.bytes,
        "key_copied": report.key_copied,
        "verified": report.verify.ok,
        "problems": report.verify.problems,
    }
    (report.dest / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")


def _remove_partial(dest: Path, made: bool) -> None:
    if made:
        shutil.rmtree(dest, ignore_errors=True)
        return
    for entry in list(dest.iterdir()) if dest.is_dir() else []:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
