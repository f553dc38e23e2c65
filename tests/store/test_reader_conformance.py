"""One conformance suite for every StoreReader: the reader contracts written in store/base.py.

Each reader is paired with the store it reads: records are written through the store, then
read through the reader. The stores read themselves; a StoreMirror, made before anything is
written, answers from what its refreshes took in. The write contracts are in
test_conformance.py, run against the stores only.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rsilab.errors import NotFoundError
from rsilab.records import (
    RECORD_TYPES,
    Campaign,
    Experiment,
    ExperimentState,
    Finding,
    FindingStatus,
    TaskRef,
)
from rsilab.store import MemoryStore, SQLiteStore, Store, StoreReader, VerifyReport, verify_store
from rsilab.store.ledger import GENESIS_HASH, record_text, sha256_text
from rsilab.store.mirror import StoreMirror
from tests.store.helpers import MEMORY_KEY, draft, fill, finding
from tests.store.pg_server import new_pg_store


@dataclass
class Pair:
    """A store to write through and the reader under test: the store itself, or a mirror."""

    store: Store
    mirror: StoreMirror | None
    key: bytes | None
    """The key the store signs checkpoints with (None: the lab's own, found by lab id)."""

    def current(self) -> StoreReader:
        """The reader, brought up to date with every commit made so far."""
        if self.mirror is None:
            return self.store
        self.mirror.refresh()
        return self.mirror

    def verify(self) -> VerifyReport:
        return verify_store(self.current(), key=self.key)


@pytest.fixture(params=["memory", "sqlite", "postgres", "mirror", "mirror-partial"])
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Pair]:
    """``mirror``: every kind and the events kept, over SQLite (as the dashboard has it);
    ``mirror-partial``: findings only, the rest read from a memory store."""
    store: Store
    if request.param in ("memory", "mirror-partial"):
        store, key = MemoryStore(key=MEMORY_KEY), MEMORY_KEY
    elif request.param == "postgres":
        store, key = new_pg_store(request), None
    else:
        store, key = SQLiteStore.open(tmp_path / "lab.db", create=True), None
    mirror = None
    if request.param == "mirror":
        mirror = StoreMirror(store, list(RECORD_TYPES), events=True)
    elif request.param == "mirror-partial":
        mirror = StoreMirror(store, ["finding"])
    try:
        yield Pair(store, mirror, key)
    finally:
        store.close()


def campaign(name: str, created_at: str) -> Campaign:
    return Campaign(task=TaskRef(name=name), created_at=created_at)


def test_a_reader_has_no_way_to_write() -> None:
    for name in ("commit", "checkpoint_now"):
        assert not hasattr(StoreReader, name), name
        assert hasattr(Store, name), name


# -- the ledger as stored ----------------------------------------------------------------------


def test_sequences_are_gap_free_and_chained(pair: Pair) -> None:
    fill(pair.store, 20)
    reader = pair.current()

    stored = list(reader.stored_events())
    events = reader.events()
    assert [s.seq for s in stored] == list(range(1, 21))
    assert [e.seq for e in events] == list(range(1, 21))
    previous = GENESIS_HASH
    for row, event in zip(stored, events, strict=True):
        assert event.prev_hash == previous
        assert row.hash == sha256_text(row.text)
        assert json.loads(row.text)["seq"] == row.seq
        previous = row.hash
    assert reader.head() == (20, previous)


def test_records_and_events_are_read_as_stored(pair: Pair) -> None:
    fill(pair.store, 5)
    reader = pair.current()

    rows = list(reader.stored_records())
    assert len(rows) == len(reader.query()) == 4
    for row in rows:
        record = reader.get(row.id)
        assert row.text == record_text(record)
        assert json.loads(row.text)["id"] == row.id
        assert (row.kind, row.rev) == (record.KIND, record.rev)
    for event in reader.stored_events():
        assert isinstance(json.loads(event.text), dict)


def test_events_after_offset_as_stored(pair: Pair) -> None:
    fill(pair.store, 6)

    assert [s.seq for s in pair.current().stored_events(after=4)] == [5, 6]


def test_verify_store_ok_through_the_reader(pair: Pair) -> None:
    fill(pair.store, 12)
    experiment = Experiment(direction_id="dir-1")
    pair.store.commit(draft(), [experiment])
    experiment.state = ExperimentState.SUCCEEDED
    pair.store.commit(draft(), [experiment])
    reader = pair.current()

    report = pair.verify()

    assert report.ok, report.problems
    assert report.first_bad_seq is None
    assert report.events == 14
    assert report.head_hash == reader.head()[1]
    assert report.records_checked == len(reader.query())


def test_verify_store_ok_on_an_empty_store(pair: Pair) -> None:
    report = pair.verify()

    assert report.ok
    assert (report.events, report.head_hash) == (0, GENESIS_HASH)
    assert pair.current().head() == (0, GENESIS_HASH)


def test_checkpoints_read_as_signed(pair: Pair) -> None:
    fill(pair.store, 3)
    signed = pair.store.checkpoint_now()

    assert signed is not None
    assert pair.current().checkpoints() == [signed]
    assert pair.verify().checkpoints_checked == 1


# -- records -----------------------------------------------------------------------------------


def test_get_missing_raises_not_found(pair: Pair) -> None:
    with pytest.raises(NotFoundError) as info:
        pair.current().get("fnd-missing")
    assert info.value.ident == "fnd-missing"


def test_get_as_wrong_type_raises_not_found(pair: Pair) -> None:
    record = finding()
    pair.store.commit(draft(), [record])
    reader = pair.current()

    with pytest.raises(NotFoundError):
        reader.get_as(record.id, Experiment)
    assert reader.get_as(record.id, Finding) == record


def test_reads_follow_later_commits(pair: Pair) -> None:
    record = finding("v1")
    pair.store.commit(draft(), [record])
    assert pair.current().get_as(record.id, Finding).claim == "v1"
    record.claim = "v2"
    pair.store.commit(draft(), [record])

    reader = pair.current()

    stored = reader.get_as(record.id, Finding)
    assert (stored.claim, stored.rev) == ("v2", 2)
    assert [(f.claim, f.rev) for f in reader.query_as(Finding)] == [("v2", 2)]
    assert [e.seq for e in reader.events()] == [1, 2]
    assert [e.seq for e in reader.events(record_id=record.id, after=1)] == [2]


def _populate_for_queries(store: Store) -> dict[str, str]:
    """Records in creation order: f1, e1, f2, f3, f4 (then f1 is updated)."""
    f1 = Finding(claim="Alpha result", status=FindingStatus.SUPPORTED, campaign_id="cmp-a")
    e1 = Experiment(direction_id="dir-1", campaign_id="cmp-a", description="alpha run")
    f2 = Finding(claim="beta result", status=FindingStatus.UNRESOLVED, campaign_id="cmp-a")
    f3 = Finding(claim="ALPHA again", status=FindingStatus.SUPPORTED, campaign_id="cmp-b")
    f4 = Finding(claim="gamma", status=FindingStatus.SUPPORTED)
    store.commit(draft(), [f1, e1])
    store.commit(draft(), [f2])
    store.commit(draft(), [f3, f4])
    f1.uncertainty = "updated last, still oldest"
    store.commit(draft(), [f1])
    return {"f1": f1.id, "e1": e1.id, "f2": f2.id, "f3": f3.id, "f4": f4.id}


def test_query_filters(pair: Pair) -> None:
    ids = _populate_for_queries(pair.store)
    reader = pair.current()

    def names(**filters: object) -> list[str]:
        by_id = {v: k for k, v in ids.items()}
        return [by_id[r.id] for r in reader.query(**filters)]  # type: ignore[arg-type]

    assert names() == ["f1", "e1", "f2", "f3", "f4"]
    assert names(kind="finding") == ["f1", "f2", "f3", "f4"]
    assert names(kind="experiment") == ["e1"]
    assert names(kind="review") == []
    assert names(campaign_id="cmp-a") == ["f1", "e1", "f2"]
    assert names(kind="finding", campaign_id="cmp-a") == ["f1", "f2"]
    assert names(fields={"status": "supported"}) == ["f1", "f3", "f4"]
    assert names(kind="finding", fields={"status": "supported"}) == ["f1", "f3", "f4"]
    assert names(fields={"status": "supported", "campaign_id": "cmp-b"}) == ["f3"]
    assert names(fields={"claim": "gamma"}) == ["f4"]
    assert names(kind="finding", fields={"claim": "gamma"}) == ["f4"]
    assert names(fields={"no_such_field": 1}) == []
    assert names(kind="finding", fields={"no_such_field": 1}) == []
    assert names(fields={"direction_id": "dir-1"}) == ["e1"]
    assert names(fields={"status": 1}) == [] and names(fields={"claim": "GAMMA"}) == []
    assert names(kind="finding", fields={"claim": "GAMMA"}) == []
    assert names(fields={"claim": "Alpha result", "status": "unresolved"}) == []
    assert names(text="alpha") == ["f1", "e1", "f3"]
    assert names(text="ALPHA", kind="finding") == ["f1", "f3"]
    assert names(text="nothing like it") == []
    assert names(limit=2) == ["f1", "e1"]
    assert names(kind="finding", limit=2) == ["f1", "f2"]
    assert names(kind="finding", fields={"status": "supported"}, limit=2) == ["f1", "f3"]
    assert [type(r) for r in reader.query_as(Experiment)] == [Experiment]


def test_query_limit_zero_returns_nothing(pair: Pair) -> None:
    _populate_for_queries(pair.store)
    reader = pair.current()

    assert reader.query(limit=0) == []
    assert reader.query(kind="finding", limit=0) == []


def test_query_text_is_literal_and_case_insensitive_beyond_ascii(pair: Pair) -> None:
    plain = finding("a_b 100% sure")
    other = finding("axb 1000 sure")
    accented = finding("Résultat ÉCOLE")
    pair.store.commit(draft(), [plain, other, accented])
    reader = pair.current()

    for kind in (None, "finding"):
        assert [r.id for r in reader.query(kind, text="a_b")] == [plain.id]
        assert [r.id for r in reader.query(kind, text="0% s")] == [plain.id]
        assert [r.id for r in reader.query(kind, text="école")] == [accented.id]
        assert [r.id for r in reader.query(kind, text="RÉSULTAT")] == [accented.id]


def test_events_filters(pair: Pair) -> None:
    a, b = finding("a", campaign_id="cmp-a"), finding("b", campaign_id="cmp-b")
    pair.store.commit(draft("1", campaign_id="cmp-a"), [a])  # 1
    pair.store.commit(draft("2", campaign_id="cmp-b"), [b])  # 2
    pair.store.commit(draft("3"))  # 3
    a.claim = "a2"
    pair.store.commit(draft("4", campaign_id="cmp-a"), [a])  # 4
    pair.store.commit(draft("5", campaign_id="cmp-b"), [a, b])  # 5
    reader = pair.current()

    def seqs(**filters: object) -> list[int]:
        return [e.seq for e in reader.events(**filters)]  # type: ignore[arg-type]

    assert seqs() == [1, 2, 3, 4, 5]
    assert seqs(after=3) == [4, 5]
    assert seqs(after=5) == []
    assert seqs(campaign_id="cmp-a") == [1, 4]
    assert seqs(campaign_id="cmp-b", after=2) == [5]
    assert seqs(record_id=a.id) == [1, 4, 5]
    assert seqs(record_id=b.id) == [2, 5]
    assert seqs(record_id=a.id, campaign_id="cmp-b") == [5]
    assert seqs(record_id="fnd-missing") == []
    assert seqs(record_id=a.id, after=1, limit=1) == [4]
    assert seqs(limit=2) == [1, 2]
    assert seqs(after=1, limit=2) == [2, 3]
    assert seqs(limit=0) == []
    assert [e.detail for e in reader.events(campaign_id="cmp-b")] == ["2", "5"]


# -- derived helpers ---------------------------------------------------------------------------


def test_resolve_campaign(pair: Pair) -> None:
    with pytest.raises(NotFoundError):
        pair.current().resolve_campaign("latest")
    newer = campaign("newer", created_at="2025-06-01T00:00:00.000000Z")
    older = campaign("older", created_at="2024-06-01T00:00:00.000000Z")
    pair.store.commit(draft(), [newer])
    pair.store.commit(draft(), [older])  # committed last, yet created first
    other = finding()
    pair.store.commit(draft(), [other])
    reader = pair.current()

    assert reader.resolve_campaign("latest") == newer
    assert reader.resolve_campaign(older.id) == older
    with pytest.raises(NotFoundError):
        reader.resolve_campaign(other.id)
    with pytest.raises(NotFoundError):
        reader.resolve_campaign("cmp-missing")


# -- concurrency -------------------------------------------------------------------------------


def test_reads_from_threads_while_commits_land(pair: Pair) -> None:
    """Every answer read meanwhile is whole: a gap-free run of events from the first, and
    records each listed once, in creation order."""
    commits, readers_n = 40, 3
    order: list[str] = []
    problems: list[BaseException] = []
    done = threading.Event()

    def read() -> None:
        try:
            while not done.is_set():
                reader = pair.current()
                seqs = [e.seq for e in reader.events()]
                assert seqs == list(range(1, len(seqs) + 1))
                for kind in (None, "finding"):
                    seen = [r.id for r in reader.query(kind)]
                    listed = set(seen)
                    assert len(listed) == len(seen)
                    assert seen == [rid for rid in order if rid in listed]
        except BaseException as exc:  # reported below, in the test's own thread
            problems.append(exc)

    threads = [threading.Thread(target=read) for _ in range(readers_n)]
    for thread in threads:
        thread.start()
    try:
        for i in range(commits):
            record = finding(f"claim {i}")
            order.append(record.id)  # before the commit: a reader may see it at once
            pair.store.commit(draft(f"event {i}"), [record])
    finally:
        done.set()
        for thread in threads:
            thread.join(timeout=60)

    assert not any(t.is_alive() for t in threads)
    assert problems == []
    assert len(pair.current().query_as(Finding)) == commits
