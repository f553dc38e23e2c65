"""StoreMirror: the same answers as its source for the kinds it copies, kept current from
the ledger, and no way to write. The reader contracts are checked for it, as for every
reader, in test_reader_conformance.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rsilab.errors import NotFoundError
from rsilab.records import (
    Campaign,
    Experiment,
    ExperimentState,
    Finding,
    FindingStatus,
    Record,
    TaskRef,
)
from rsilab.store import SQLiteStore, Store, StoreReader
from rsilab.store.mirror import StoreMirror
from tests.store.helpers import draft

KINDS = ("campaign", "experiment")


@pytest.fixture
def source(tmp_path: Path) -> Iterator[SQLiteStore]:
    store = SQLiteStore.open(tmp_path / "lab.db", create=True)
    try:
        yield store
    finally:
        store.close()


def seed(store: SQLiteStore) -> tuple[Campaign, list[Experiment]]:
    campaign = Campaign(task=TaskRef(name="digits"))
    store.commit(draft("campaign"), [campaign])
    exps = []
    for i in range(6):
        exp = Experiment(
            direction_id=f"dir-{i % 2}",
            campaign_id=campaign.id,
            description=f"try Width {i}",
            config={"width": i, "tags": ["a", "b"]},
        )
        store.commit(draft(f"exp {i}", campaign_id=campaign.id), [exp])
        exps.append(exp)
    return campaign, exps


QUERIES: list[dict[str, Any]] = [
    {},
    {"kind": "experiment"},
    {"kind": "experiment", "limit": 2},
    {"kind": "experiment", "fields": {"direction_id": "dir-1"}},
    {"kind": "experiment", "fields": {"state": "running"}},
    {"kind": "experiment", "fields": {"config": {"width": 3, "tags": ["a", "b"]}}},
    {"kind": "experiment", "text": "WIDTH 4"},
    {"kind": "finding"},
]


def ids(records: list[Record]) -> list[tuple[str, int]]:
    return [(r.id, r.rev) for r in records]


def same_answers(mirror: StoreMirror, source: SQLiteStore, campaign_id: str) -> None:
    for query in QUERIES:
        for scope in ({}, {"campaign_id": campaign_id}, {"campaign_id": "cmp-other"}):
            args = {**query, **scope}
            assert ids(mirror.query(**args)) == ids(source.query(**args)), args


def test_reads_match_the_source_and_follow_its_writes(source: SQLiteStore) -> None:
    campaign, exps = seed(source)
    mirror = StoreMirror(source, KINDS)
    assert mirror.seq == source.head()[0]
    same_answers(mirror, source, campaign.id)

    exps[1].state = ExperimentState.RUNNING  # an update keeps its place in the order
    source.commit(draft("run", campaign_id=campaign.id), [exps[1]])
    late = Experiment(direction_id="dir-1", campaign_id=campaign.id, description="width 9")
    other = Finding(claim="c", status=FindingStatus.UNRESOLVED)
    source.commit(draft("more", campaign_id=campaign.id), [late, other])
    assert mirror.query_as(Experiment, fields={"state": "running"}) == []  # not refreshed yet
    assert mirror.refresh() == 2 and mirror.seq == source.head()[0]
    same_answers(mirror, source, campaign.id)
    assert mirror.get(exps[1].id).rev == 2
    assert mirror.refresh() == 0


def test_other_kinds_and_events_are_read_from_the_source(source: SQLiteStore) -> None:
    campaign, _ = seed(source)
    mirror = StoreMirror(source, KINDS)
    found = Finding(claim="late", status=FindingStatus.UNRESOLVED)
    source.commit(draft("finding"), [found])
    assert [f.id for f in mirror.query_as(Finding)] == [found.id]  # no refresh needed
    assert mirror.get(found.id).id == found.id
    assert [e.seq for e in mirror.events(campaign_id=campaign.id)] == [
        e.seq for e in source.events(campaign_id=campaign.id)
    ]
    with pytest.raises(NotFoundError):
        mirror.get("exp-000000000000")


def test_the_mirror_is_a_reader_with_no_way_to_write(source: SQLiteStore) -> None:
    mirror = StoreMirror(source, KINDS)
    assert isinstance(mirror, StoreReader)
    assert not isinstance(mirror, Store)
    for name in ("commit", "checkpoint_now"):
        assert not hasattr(mirror, name), name


def test_refreshes_and_reads_from_many_threads_agree(source: SQLiteStore) -> None:
    campaign, _ = seed(source)
    mirror = StoreMirror(source, KINDS)
    problems: list[BaseException] = []

    def reader() -> None:
        try:
            for _ in range(50):
                mirror.refresh()
                seen = mirror.query_as(Experiment, campaign_id=campaign.id)
                assert len({e.id for e in seen}) == len(seen)
        except BaseException as exc:  # reported below, in the test's own thread
            problems.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for i in range(20):
        new = Experiment(direction_id="dir-0", campaign_id=campaign.id, description=f"n{i}")
        source.commit(draft("new", campaign_id=campaign.id), [new])
    for t in threads:
        t.join()
    assert not problems
    mirror.refresh()
    assert len(mirror.query_as(Experiment, campaign_id=campaign.id)) == 26


def test_kept_events_answer_as_the_source_does(source: SQLiteStore) -> None:
    campaign, exps = seed(source)
    mirror = StoreMirror(source, KINDS, events=True)
    exps[0].state = ExperimentState.RUNNING
    source.commit(draft("run", campaign_id=campaign.id), [exps[0]])
    source.commit(draft("lab-wide"))
    assert mirror.refresh() == 2

    def seqs(store: SQLiteStore | StoreMirror, **filters: Any) -> list[int]:
        return [e.seq for e in store.events(**filters)]

    for filters in (
        {},
        {"after": 3},
        {"after": 3, "limit": 2},
        {"campaign_id": campaign.id},
        {"campaign_id": campaign.id, "after": 4},
        {"record_id": exps[0].id},
        {"record_id": exps[0].id, "campaign_id": "cmp-other"},
        {"campaign_id": "cmp-other"},
    ):
        assert seqs(mirror, **filters) == seqs(source, **filters), filters
