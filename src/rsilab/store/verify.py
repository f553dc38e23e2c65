"""Verify a store's ledger, records and checkpoints, including the watermark outside the lab."""

from __future__ import annotations

from rsilab.store import keys
from rsilab.store.base import Store
from rsilab.store.ledger import VerifyReport, verify_ledger


def verify_store(store: Store, key: bytes | None = None) -> VerifyReport:
    """Full verification; ``key`` defaults to the lab's key found by :mod:`rsilab.store.keys`."""
    key = key if key is not None else keys.load_key(store.lab_id)
    checkpoints = store.checkpoints()
    watermark = keys.load_watermark(store.lab_id)
    if watermark is not None and all(cp.seq != watermark.seq for cp in checkpoints):
        checkpoints.append(watermark)
    checkpoints.sort(key=lambda cp: cp.seq)
    return verify_ledger(
        store.stored_events(),
        store.stored_records(),
        checkpoints,
        key=key,
        lab_id=store.lab_id,
    )
