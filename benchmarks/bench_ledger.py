"""Ledger append throughput on SQLite: one writer, and two writer processes on one lab."""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from rsilab.records import EventDraft
from rsilab.store import Lab, SQLiteStore, verify_store


def _append(db: Path, n: int, actor: str) -> None:
    store = SQLiteStore.open(db)
    try:
        for _ in range(n):
            store.commit(EventDraft(actor=actor, role="worker", action="tool_call", tool="bench"))
    finally:
        store.close()


def _writer_process(db: str, n: int, actor: str, key_dir: str) -> None:
    os.environ["RSILAB_KEY_DIR"] = key_dir
    _append(Path(db), n, actor)


def run(quick: bool) -> list[dict[str, Any]]:
    """Events per second for 1 and 2 writers; the chain is verified after each run."""
    n = 2_000 if quick else 10_000
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("RSILAB_KEY_DIR", str(Path(tmp) / "keys"))
        with Lab.init(Path(tmp) / "one") as lab:
            pass
        started = time.perf_counter()
        _append(Path(tmp) / "one" / "lab.db", n, "w1")
        elapsed = time.perf_counter() - started
        rows.append(_row("1 writer", n, elapsed, Path(tmp) / "one", ">= 2,000 events/s"))

        with Lab.init(Path(tmp) / "two") as lab:
            db = str(lab.path / "lab.db")
        ctx = multiprocessing.get_context("spawn")
        key_dir = os.environ["RSILAB_KEY_DIR"]
        procs = [
            ctx.Process(target=_writer_process, args=(db, n // 2, f"w{i}", key_dir))
            for i in range(2)
        ]
        started = time.perf_counter()
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        elapsed = time.perf_counter() - started  # includes process start-up: a lower bound
        rows.append(_row("2 writer processes", n, elapsed, Path(tmp) / "two", "no fork, verifies"))
    return rows


def _row(label: str, n: int, elapsed: float, lab_path: Path, target: str) -> dict[str, Any]:
    with Lab.open(lab_path) as lab:
        report = verify_store(lab.store)
    return {
        "benchmark": f"ledger appends on SQLite, {label}",
        "events": n,
        "events_per_s": round(n / elapsed),
        "verified": report.ok,
        "target": target,
    }


if __name__ == "__main__":
    for row in run(quick=True):
        print(row)
