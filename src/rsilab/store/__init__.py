"""Persistence: the StoreReader and Store ABCs and their backends, the ledger, artifacts, and
the lab folder."""

from typing import TYPE_CHECKING

from rsilab.store.artifacts import ArtifactStore, StoredArtifact
from rsilab.store.base import Store, StoreReader
from rsilab.store.lab import Lab, resolve_lab_path
from rsilab.store.ledger import VerifyReport
from rsilab.store.memory import MemoryStore
from rsilab.store.sqlite import SQLiteStore
from rsilab.store.verify import verify_store

if TYPE_CHECKING:
    from rsilab.store.postgres import PostgresStore

__all__ = [
    "ArtifactStore",
    "Lab",
    "MemoryStore",
    "PostgresStore",
    "SQLiteStore",
    "Store",
    "StoreReader",
    "StoredArtifact",
    "VerifyReport",
    "resolve_lab_path",
    "verify_store",
]


def __getattr__(name: str) -> object:
    # PostgresStore loads SQLAlchemy, slow to import: only code that uses it pays for it.
    if name == "PostgresStore":
        from rsilab.store.postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
