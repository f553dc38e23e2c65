"""One conformance suite for every Store backend: the write contracts written in store/base.py.

The read contracts, which the stores share with every other StoreReader, are checked in
test_reader_conformance.py.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rsilab.errors import ConflictError, NotFoundError, RsilabError
from rsilab.records import (
    Artifact,
    Experiment,
    ExperimentState,
    Finding,
    FindingStatus,
    ProvenanceNote,
    Record,
)
from rsilab.store import MemoryStore, SQLiteStore, Store, VerifyReport, verify_store
from rsilab.store.base import CHECKPOINT_INTERVAL
from rsilab.store.fences import Fence
from rsilab.store.ledger import GENESIS_HASH, record_text, sha256_text
from tests.store.helpers import MEMORY_KEY, draft, fill, finding
from tests.store.pg_server import new_pg_store


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    backend: Store
    if request.param == "memory":
        backend = MemoryStore(key=MEMORY_KEY)
    elif request.param == "postgres":
        backend = new_pg_store(request)
    else:
        backend = SQLiteStore.open(tmp_path / "lab.db", create=True)
    try:
        yield backend
    finally:
        backend.close()


def verify(store: Store) -> VerifyReport:
    """verify_store with the key that backend signs with (SQLite and PostgreSQL find their own)."""
    return verify_store(store, key=MEMORY_KEY if isinstance(store, MemoryStore) else None)


def artifact(notes: list[ProvenanceNote] | None = None) -> Artifact:
    return Artifact(sha256="ab" * 32, artifact_kind="file", size=3, notes=notes or [])


# -- commits -----------------------------------------------------------------------------------


def test_commit_writes_records_and_exactly_one_event(store: Store) -> None:
    first, second = finding("first"), finding("second")

    event = store.commit(draft("two records"), [first, second])

    assert (event.seq, event.prev_hash) == (1, GENESIS_HASH)
    assert [(r.kind, r.id, r.rev) for r in event.records] == [
        ("finding", first.id, 1),
        ("finding", second.id, 1),
    ]
    assert first.rev == second.rev == 1
    assert store.get(first.id) == first
    assert store.get(second.id) == second
    for ref in event.records:
        assert ref.digest == sha256_text(record_text(store.get(ref.id)))
    stored = list(store.stored_events())
    assert len(stored) == 1
    assert store.head() == (1, stored[0].hash)
    assert store.events() == [event]


def test_commit_without_records_appends_an_event(store: Store) -> None:
    event = store.commit(draft("note only"))

    assert event.records == []
    assert store.head()[0] == 1
    assert store.query() == []


def test_failed_commit_writes_nothing(store: Store) -> None:
    existing = finding("kept")
    store.commit(draft(), [existing])
    head = store.head()
    stale = store.get_as(existing.id, Finding)
    existing.claim = "changed first"
    store.commit(draft(), [existing])
    head = store.head()
    new = finding("never written")
    stale.claim = "changed from a stale copy"

    with pytest.raises(ConflictError):
        store.commit(draft("fails"), [new, stale])

    assert store.head() == head
    assert len(store.events()) == 2
    with pytest.raises(NotFoundError):
        store.get(new.id)
    assert store.get(existing.id) == existing
    assert (new.rev, stale.rev) == (0, 1)
    # The failed transaction left nothing open: the next commit goes through.
    assert store.commit(draft("after"), [new]).seq == 3
    assert verify(store).ok


# -- revisions ---------------------------------------------------------------------------------


def test_new_record_must_have_revision_zero(store: Store) -> None:
    ghost = finding("claims to exist")
    ghost.rev = 3

    with pytest.raises(ConflictError, match="does not exist"):
        store.commit(draft(), [ghost])

    assert store.head()[0] == 0
    assert ghost.rev == 3


def test_existing_record_written_as_new_conflicts(store: Store) -> None:
    original = finding("original")
    store.commit(draft(), [original])
    twin = original.model_copy(update={"rev": 0, "claim": "twin"})

    with pytest.raises(ConflictError, match="already exists"):
        store.commit(draft(), [twin])

    assert store.get_as(original.id, Finding).claim == "original"


def test_stale_revision_conflicts(store: Store) -> None:
    record = finding("v1")
    store.commit(draft(), [record])
    mine = store.get_as(record.id, Finding)
    theirs = store.get_as(record.id, Finding)
    theirs.claim = "theirs"
    store.commit(draft(), [theirs])
    mine.claim = "mine"

    with pytest.raises(ConflictError, match="changed meanwhile"):
        store.commit(draft(), [mine])

    stored = store.get_as(record.id, Finding)
    assert (stored.claim, stored.rev) == ("theirs", 2)
    assert mine.rev == 1


def test_revision_bumped_in_place_on_every_write(store: Store) -> None:
    record = finding("v")
    for expected in (1, 2, 3):
        event = store.commit(draft(), [record])
        assert record.rev == expected
        assert event.records[0].rev == expected
        record.claim += "+"

    assert store.get(record.id).rev == 3


def test_same_record_twice_in_one_commit_conflicts(store: Store) -> None:
    record = finding()

    with pytest.raises(ConflictError, match="twice"):
        store.commit(draft(), [record, record])

    assert store.head()[0] == 0


def test_kind_of_a_record_cannot_change(store: Store) -> None:
    experiment = Experiment(direction_id="dir-1")
    store.commit(draft(), [experiment])
    impostor = Finding(
        id=experiment.id,
        claim="x",
        status=FindingStatus.SUPPORTED,
        created_at=experiment.created_at,
        rev=1,
    )

    with pytest.raises(ConflictError):
        store.commit(draft(), [impostor])

    assert isinstance(store.get(experiment.id), Experiment)


# -- immutability ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "final", [ExperimentState.SUCCEEDED, ExperimentState.FAILED, ExperimentState.CANCELLED]
)
def test_finished_experiment_cannot_change(store: Store, final: ExperimentState) -> None:
    experiment = Experiment(direction_id="dir-1", state=ExperimentState.RUNNING)
    store.commit(draft(), [experiment])
    experiment.state = final
    store.commit(draft("finish"), [experiment])  # reaching a final state is allowed
    head = store.head()
    experiment.summary_text = "rewritten afterwards"

    with pytest.raises(ConflictError, match="finished"):
        store.commit(draft("edit"), [experiment])

    stored = store.get_as(experiment.id, Experiment)
    assert (stored.state, stored.summary_text, stored.rev) == (final, "", 2)
    assert store.head() == head


def test_finished_experiment_cannot_be_reopened(store: Store) -> None:
    experiment = Experiment(direction_id="dir-1", state=ExperimentState.SUCCEEDED)
    store.commit(draft(), [experiment])
    experiment.state = ExperimentState.RUNNING

    with pytest.raises(ConflictError):
        store.commit(draft(), [experiment])

    assert store.get_as(experiment.id, Experiment).state is ExperimentState.SUCCEEDED


def test_artifact_notes_can_be_appended(store: Store) -> None:
    record = artifact([ProvenanceNote(actor="a", text="made")])
    store.commit(draft(), [record])
    record.notes.append(ProvenanceNote(actor="b", text="used"))

    store.commit(draft(), [record])

    assert [n.text for n in store.get_as(record.id, Artifact).notes] == ["made", "used"]


@pytest.mark.parametrize("change", ["rewrite", "remove", "reorder", "content"])
def test_artifact_history_cannot_be_rewritten(store: Store, change: str) -> None:
    record = artifact([ProvenanceNote(actor="a", text="one"), ProvenanceNote(actor="b", text="2")])
    store.commit(draft(), [record])
    before = store.get(record.id)
    if change == "rewrite":
        record.notes[0] = ProvenanceNote(actor="a", text="something else")
    elif change == "remove":
        record.notes.pop(0)
    elif change == "reorder":
        record.notes.reverse()
    else:
        record.sha256 = "cd" * 32

    with pytest.raises(ConflictError):
        store.commit(draft(), [record])

    assert store.get(record.id) == before


@pytest.mark.parametrize(
    ("field", "value"),
    [("campaign_id", "cmp-other"), ("created_at", "2000-01-01T00:00:00.000000Z")],
)
def test_identity_fields_are_immutable(store: Store, field: str, value: str) -> None:
    record = finding("stable", campaign_id="cmp-first")
    store.commit(draft(), [record])
    changed = record.model_copy(update={field: value})

    with pytest.raises(ConflictError, match=field):
        store.commit(draft(), [changed])

    assert store.get(record.id) == record


def test_id_cannot_change(store: Store) -> None:
    record = finding("stable")
    store.commit(draft(), [record])
    renamed = record.model_copy(update={"id": "fnd-000000000000"})

    with pytest.raises(ConflictError):
        store.commit(draft(), [renamed])

    assert store.get(record.id) == record
    with pytest.raises(NotFoundError):
        store.get("fnd-000000000000")


# -- copies ------------------------------------------------------------------------------------


def test_reads_return_copies(store: Store) -> None:
    record = finding("original")
    store.commit(draft(), [record])

    store.get_as(record.id, Finding).claim = "mutated"
    store.query_as(Finding)[0].claim = "mutated"

    assert store.get_as(record.id, Finding).claim == "original"


# -- concurrency -------------------------------------------------------------------------------


def test_concurrent_commits_from_threads_stay_serialised(store: Store) -> None:
    threads_n, per_thread = 8, 50
    barrier = threading.Barrier(threads_n)
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            barrier.wait(timeout=30)
            for i in range(per_thread):
                store.commit(draft(f"w{worker} {i}"), [finding(f"w{worker} {i}")])
                if i % 10 == 0:
                    store.query(kind="finding", limit=5)
                    store.head()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert not any(t.is_alive() for t in threads)
    assert errors == []
    total = threads_n * per_thread
    assert [s.seq for s in store.stored_events()] == list(range(1, total + 1))
    assert len(store.query(kind="finding")) == total
    assert [cp.seq for cp in store.checkpoints()] == list(
        range(CHECKPOINT_INTERVAL, total + 1, CHECKPOINT_INTERVAL)
    )
    report = verify(store)
    assert report.ok, report.problems
    assert (report.events, report.records_checked) == (total, total)


# -- checkpoints and verification --------------------------------------------------------------


def test_signed_checkpoint_every_interval(store: Store) -> None:
    fill(store, CHECKPOINT_INTERVAL + 1, with_records=False)

    checkpoints = store.checkpoints()
    assert [cp.seq for cp in checkpoints] == [CHECKPOINT_INTERVAL]
    hashes = {s.seq: s.hash for s in store.stored_events()}
    assert checkpoints[0].head_hash == hashes[CHECKPOINT_INTERVAL]
    report = verify(store)
    assert report.ok, report.problems
    assert report.checkpoints_checked >= 1


def test_checkpoint_now_signs_the_head(store: Store) -> None:
    fill(store, 3)

    checkpoint = store.checkpoint_now()

    assert checkpoint is not None
    assert (checkpoint.seq, checkpoint.head_hash) == store.head()
    assert checkpoint in store.checkpoints()
    assert verify(store).checkpoints_checked >= 1


# -- fences ------------------------------------------------------------------------------------


class Fenced(RsilabError):
    """The error the test fences raise."""


def _gate_fence(gate_id: str) -> Fence:
    """A fence on campaign cmp-a decided by the finding ``gate_id``: open while its claim is
    'open'."""

    def admits(stored: Record | None) -> RsilabError | None:
        if isinstance(stored, Finding) and stored.claim == "open":
            return None
        return Fenced(f"gate is {stored.claim if isinstance(stored, Finding) else 'missing'}")

    return Fence("cmp-a", gate_id, admits)


def test_a_fence_refuses_its_campaigns_writes_once_its_record_says_no(store: Store) -> None:
    gate = finding("open")
    store.commit(draft("gate"), [gate])
    store.fence(_gate_fence(gate.id))
    store.commit(draft("admitted", campaign_id="cmp-a"), [finding(campaign_id="cmp-a")])
    gate.claim = "closed"
    store.commit(draft("closing writes the gate itself"), [gate])
    head = store.head()
    loose = finding("not to be written", campaign_id="cmp-a")
    with pytest.raises(Fenced, match="gate is closed"):
        store.commit(draft("event names the campaign", campaign_id="cmp-a"))
    with pytest.raises(Fenced):
        store.commit(draft("a record of the campaign"), [loose])
    with pytest.raises(Fenced):
        store.commit(draft("both", campaign_id="cmp-a"), [finding("x", campaign_id="cmp-b")])
    assert store.head() == head and loose.rev == 0
    with pytest.raises(NotFoundError):
        store.get(loose.id)
    # other campaigns, writes of no campaign and the gate itself are not fenced
    store.commit(draft("other", campaign_id="cmp-b"), [finding(campaign_id="cmp-b")])
    store.commit(draft("no campaign"), [finding()])
    gate.claim = "open"
    store.commit(draft("reopen"), [gate])
    store.commit(draft("admitted again", campaign_id="cmp-a"))
    assert store.head()[0] == head[0] + 4
    assert verify(store).ok


def test_an_unfenced_campaign_is_written_again(store: Store) -> None:
    fence = _gate_fence("fnd-missing")
    store.fence(fence)
    with pytest.raises(Fenced, match="gate is missing"):
        store.commit(draft("refused", campaign_id="cmp-a"))
    store.unfence(_gate_fence("fnd-missing"))  # another fence: this one stays
    with pytest.raises(Fenced):
        store.commit(draft("refused", campaign_id="cmp-a"))
    store.unfence(fence)
    assert store.commit(draft("written", campaign_id="cmp-a")).seq == 1
