"""The key and watermark kept outside the lab."""

from __future__ import annotations

from pathlib import Path

from rsilab.store import MemoryStore, keys, verify_store
from rsilab.store.ledger import make_checkpoint
from tests.store.helpers import fill


def test_watermark_is_never_lowered(isolated_environment: Path) -> None:
    key = keys.create_key("lab-w")
    keys.raise_watermark("lab-w", make_checkpoint(key, "lab-w", 128, "b" * 64))
    keys.raise_watermark("lab-w", make_checkpoint(key, "lab-w", 64, "a" * 64))
    mark = keys.load_watermark("lab-w")
    assert mark is not None and mark.seq == 128


def test_unsigned_tail_is_a_warning_not_a_failure() -> None:
    store = MemoryStore(key=b"k" * 32)
    fill(store, 70, with_records=False)
    report = verify_store(store, key=b"k" * 32)
    assert report.ok, report.problems
    assert any("65..70" in w for w in report.warnings)
    store.checkpoint_now()
    report = verify_store(store, key=b"k" * 32)
    assert report.ok and not report.warnings
