"""A lab: one store (the SQLite file) and one artifact folder, found by path or environment.

Resolution order for the lab folder: an explicit path (``--lab``), ``RSILAB_LAB``, then
``./.rsilab``. Layout: ``<lab>/lab.db`` (+ WAL files) and ``<lab>/blobs/``. The folder is
private to its owner (mode 0700, restored when a lab is opened).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from rsilab.errors import LabError
from rsilab.records import EventDraft
from rsilab.store.artifacts import ArtifactStore
from rsilab.store.base import Store
from rsilab.store.sqlite import SQLiteStore

DB_NAME = "lab.db"
DEFAULT_LAB = ".rsilab"


def resolve_lab_path(explicit: str | Path | None = None) -> Path:
    """The lab folder to use: ``explicit``, else ``$RSILAB_LAB``, else ``./.rsilab``."""
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("RSILAB_LAB") or DEFAULT_LAB)


def _private(folder: Path) -> None:
    """Make the lab folder its owner's alone (mode 0700), when this user owns it: no other
    user - a sandbox's uid above all - can list or read anything in it by its host path."""
    info = folder.stat()
    if info.st_uid == os.geteuid() and info.st_mode & 0o077:
        with contextlib.suppress(OSError):  # a read-only copy of a lab stays as it is
            folder.chmod(0o700)


class Lab:
    """An opened lab. Close it (or use ``with``) so the ledger head gets signed."""

    def __init__(self, path: Path, store: Store, artifacts: ArtifactStore) -> None:
        self.path = path
        self.store = store
        self.artifacts = artifacts

    @classmethod
    def init(cls, path: str | Path | None = None) -> Lab:
        """Create a new lab; LabError if one exists there or the folder cannot be written."""
        folder = resolve_lab_path(path)
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
        store = SQLiteStore.open(folder / DB_NAME, create=True)
        artifacts = ArtifactStore(folder)
        artifacts.ensure()
        store.commit(
            EventDraft(actor="rsilab", role="human", action="lab_created", detail=str(folder))
        )
        return cls(folder, store, artifacts)

    @classmethod
    def open(cls, path: str | Path | None = None) -> Lab:
        """Open an existing lab; LabError (with a hint to run ``rsilab init``) if there is none."""
        folder = resolve_lab_path(path)
        db = folder / DB_NAME
        if not db.exists():
            raise LabError(
                f"no rsilab lab at {folder}",
                f"create one with `rsilab init --lab {folder}`, or set RSILAB_LAB",
            )
        _private(folder)
        return cls(folder, SQLiteStore.open(db), ArtifactStore(folder))

    def close(self) -> None:
        """Close the store (signing the head if this process wrote to it)."""
        self.store.close()

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
