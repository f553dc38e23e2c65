"""A lab: one store and one folder (artifacts, workspaces), found by path, URL or environment.

Resolution order: an explicit ``--lab``, ``RSILAB_LAB``, then ``./.rsilab``. The value is a
folder (an SQLite lab: ``<lab>/lab.db`` (+ WAL files) and ``<lab>/blobs/``) or a PostgreSQL URL
``postgresql://USER@HOST/DB?artifacts=FOLDER`` (records and ledger in the database, the rest in
FOLDER; see :mod:`rsilab.store._pg_url`). The folder is private to its owner (mode 0700,
restored when a lab is opened).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from rsilab.errors import REFUSALS, LabError, WriteRefused
from rsilab.records import EventDraft
from rsilab.store import keys
from rsilab.store._pg_url import is_pg_url, parse_pg_url
from rsilab.store.artifacts import ArtifactStore
from rsilab.store.base import Store
from rsilab.store.sqlite import SQLiteStore

DB_NAME = "lab.db"
DEFAULT_LAB = ".rsilab"


def lab_spec(explicit: str | Path | None = None) -> str | Path:
    """What names the lab: ``explicit``, else ``$RSILAB_LAB``, else ``./.rsilab`` (a folder
    or a PostgreSQL URL)."""
    if explicit:
        return explicit
    return os.environ.get("RSILAB_LAB") or DEFAULT_LAB


def resolve_lab_path(explicit: str | Path | None = None) -> Path:
    """The lab folder to use: as :func:`lab_spec` finds it; for a PostgreSQL URL, its
    ``artifacts`` folder. Raises LabError for a URL without one."""
    spec = lab_spec(explicit)
    if is_pg_url(spec):
        return parse_pg_url(spec).folder
    return Path(spec)


def lab_exists(explicit: str | Path | None = None) -> bool:
    """Whether a lab is where :func:`lab_spec` points: a folder holding ``lab.db``; for a
    PostgreSQL URL, an artifact folder that :meth:`Lab.init` made (its ``blobs``). The
    database is not asked: :meth:`Lab.open` and :meth:`Lab.init` refuse a mismatch clearly."""
    spec = lab_spec(explicit)
    if is_pg_url(spec):
        return (parse_pg_url(spec).folder / "blobs").is_dir()
    return (Path(spec) / DB_NAME).exists()


def _open_store(spec: str | Path, folder: Path, create: bool, read_only: bool = False) -> Store:
    if is_pg_url(spec):
        from rsilab.store.postgres import PostgresStore  # loads the driver only when used

        return PostgresStore.open(parse_pg_url(spec), create=create, read_only=read_only)
    return SQLiteStore.open(folder / DB_NAME, create=create, read_only=read_only)


def _private(folder: Path) -> None:
    """Make the lab folder its owner's alone (mode 0700), when this user owns it: no other
    user - a sandbox's uid above all - can list or read anything in it by its host path."""
    info = folder.stat()
    if info.st_uid == os.geteuid() and info.st_mode & 0o077:
        with contextlib.suppress(OSError):  # a read-only copy of a lab stays as it is
            folder.chmod(0o700)


def _check_key_dir() -> None:
    """Refuse a new lab whose ledger key (and watermark) could not be written: a lab made
    anyway would hold a database and no key, refuse the ``rsilab init`` run again once the
    key folder is fixed, and be written unsigned by every other command."""
    try:
        keys.check_key_dir()
    except OSError as exc:
        what = f"cannot write the ledger key to {keys.key_dir()}"
        remedy = "set RSILAB_KEY_DIR to a writable folder outside the lab"
        if exc.errno in REFUSALS:
            raise WriteRefused(
                f"{what}: {REFUSALS[exc.errno]}; no lab was created",
                path=str(keys.key_dir()),
                code=exc.errno,
                remedy=remedy,
                then="run `rsilab init` again",
            ) from exc
        raise LabError(
            f"{what}: {exc.strerror or exc}; no lab was created", f"{remedy}, then run it again"
        ) from exc


class Lab:
    """An opened lab. Close it (or use ``with``) so the ledger head gets signed."""

    def __init__(self, path: Path, store: Store, artifacts: ArtifactStore) -> None:
        self.path = path
        self.store = store
        self.artifacts = artifacts

    @classmethod
    def init(cls, path: str | Path | None = None) -> Lab:
        """Create a new lab; LabError if one exists there or the folder cannot be written,
        or the key folder cannot (then nothing is made: :func:`_check_key_dir`).

        For a PostgreSQL URL the database must exist and hold no lab; the artifact folder is
        made as a folder lab's is."""
        folder = resolve_lab_path(path)
        _check_key_dir()
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            _private(folder)
            probe = folder / ".write-test"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise LabError(
                f"cannot create a lab in {folder}: {exc.strerror or exc}",
                "choose a writable folder with --lab or RSILAB_LAB",
            ) from exc
        store = _open_store(lab_spec(path), folder, create=True)
        artifacts = ArtifactStore(folder)
        artifacts.ensure()
        store.commit(
            EventDraft(actor="rsilab", role="human", action="lab_created", detail=str(folder))
        )
        return cls(folder, store, artifacts)

    @classmethod
    def open(cls, path: str | Path | None = None, *, read_only: bool = False) -> Lab:
        """Open an existing lab; LabError (with a hint to run ``rsilab init``) if there is none.

        With ``read_only`` (commands that only read: ``verify``, ``log``, ``show``,
        ``report``) nothing is written to a folder lab, its folder's mode included, so a
        read-only folder or mount opens (see :meth:`SQLiteStore.open`); the store's commits
        raise LabError. A PostgreSQL lab is opened with read-only transactions, so its server
        refuses any write too (see :meth:`PostgresStore.open`), and its artifact folder is
        left as it is.
        """
        spec = lab_spec(path)
        folder = resolve_lab_path(path)
        if is_pg_url(spec):
            if not folder.is_dir():
                raise LabError(
                    f"the artifact folder {folder} of the PostgreSQL lab does not exist",
                    "check the URL's artifacts= parameter (rsilab init --lab URL makes it)",
                )
            if not read_only:
                _private(folder)
            store = _open_store(spec, folder, create=False, read_only=read_only)
            return cls(folder, store, ArtifactStore(folder))
        db = folder / DB_NAME
        if not db.exists():
            raise LabError(
                f"no rsilab lab at {folder}",
                f"create one with `rsilab init --lab {folder}`, or set RSILAB_LAB",
            )
        if not read_only:
            _private(folder)
        return cls(folder, SQLiteStore.open(db, read_only=read_only), ArtifactStore(folder))

    def close(self) -> None:
        """Close the store (signing the head if this process wrote to it)."""
        self.store.close()

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
