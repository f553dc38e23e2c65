"""Persistence: the StoreReader and Store ABCs and their backends, the ledger, artifacts, and
the lab folder."""

from rsilab.store.artifacts import ArtifactStore, StoredArtifact
from rsilab.store.base import Store, StoreReader
from rsilab.store.lab import Lab, resolve_lab_path
from rsilab.store.ledger import VerifyReport
from rsilab.store.memory import MemoryStore
from rsilab.store.sqlite import SQLiteStore
from rsilab.store.verify import verify_store

__all__ = [
    "ArtifactStore",
    "Lab",
    "MemoryStore",
    "SQLiteStore",
    "Store",
    "StoreReader",
    "StoredArtifact",
    "VerifyReport",
    "resolve_lab_path",
    "verify_store",
]
