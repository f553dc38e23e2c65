"""What a lab holds just after a kill: kept to check at the end that nothing of it was lost."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from rsilab.controller.host import DEFAULT_SEEDS
from rsilab.records import Candidate, record_type
from rsilab.store import Lab, verify_store


@dataclass
class Snapshot:
    """What the lab held just after a kill, before anything else ran."""

    head: int
    head_hash: str
    revs: dict[str, int]
    """Every record's id and revision."""
    finished: dict[str, str]
    """The sha256 of each finished record's stored body (a finished record never changes)."""
    in_flight: list[str]
    """Work the kill left open: unfinished jobs by kind, candidates, experiments, intents."""
    last_action: str
    verify_problems: list[str]
    rejudge_predicts: int = 0
    """Controller predict jobs the next run makes re-judging the candidates this kill left
    open: each seed's, and the model-use probe's (synthetic trains)."""
    temporary: list[str] = field(default_factory=list)
    """What the run's temporary folder and the lab's ``tmp`` and ``sandbox`` folders held."""


def snapshot(lab: Path, keys: Path, temporary: Sequence[Path]) -> Snapshot:
    """What ``lab`` holds now (no process runs it): records, ledger head, what is open,
    whether it verifies (with the key in ``keys``), and what the ``temporary`` folders hold."""
    db = lab / "lab.db"
    with closing(sqlite3.connect(db, timeout=30)) as conn:
        rows = conn.execute("SELECT id, kind, rev, body FROM records").fetchall()
        head = conn.execute(
            "SELECT seq, hash, body FROM events ORDER BY seq DESC LIMIT 1"
        ).fetchone()
    revs, finished, in_flight, rejudge = {}, {}, [], 0
    for record_id, kind, rev, body in rows:
        revs[str(record_id)] = int(rev)
        record = record_type(str(kind)).model_validate_json(body)
        if record.is_finished():
            finished[str(record_id)] = hashlib.sha256(str(body).encode()).hexdigest()
        elif kind in ("job", "candidate", "experiment", "intent", "campaign"):
            state = getattr(record, "status", None) or getattr(record, "state", "")
            label = getattr(record, "kind", None) or getattr(record, "key", None) or record_id
            in_flight.append(f"{kind} {label} {state}")
            if isinstance(record, Candidate):
                rejudge += (len(record.seeds) or DEFAULT_SEEDS) + 1
    with Lab.open(lab) as opened:
        problems = [str(p) for p in verify_store(opened.store, None, key_dir=keys).problems]
    return Snapshot(
        head=int(head[0]),
        head_hash=str(head[1]),
        revs=revs,
        finished=finished,
        in_flight=sorted(in_flight),
        last_action=str(json.loads(head[2]).get("action", "")),
        verify_problems=problems,
        rejudge_predicts=rejudge,
        temporary=[
            str(p) for place in temporary if place.is_dir() for p in sorted(place.iterdir())
        ],
    )
