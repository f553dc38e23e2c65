"""Persistence: the Store ABC and its backends, the ledger, artifacts, and the lab folder."""

from rsilab.store.artifacts import ArtifactStore, StoredArtifact
from rsilab.store.base import Store
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
    "StoredArtifact",
    "VerifyReport",
    "resolve_lab_path",
    "verify_store",
]
