"""Ledger verification against facts stated here: RFC 8785 text, sha256 and HMAC values computed
with the standard library, each problem's words, and every record type whose blobs a verify
checks. ``test_tamper.py`` edits real labs; this file builds chains and stores by hand."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from rsilab.records import (
    Artifact,
    Candidate,
    Dataset,
    EventDraft,
    Experiment,
    Job,
    JobInputs,
    Record,
    RecordRef,
    SystemVersion,
    Tombstone,
)
from rsilab.store import ArtifactStore, MemoryStore, SQLiteStore, keys, verify_store
from rsilab.store.ledger import (
    GENESIS_HASH,
    Checkpoint,
    StoredEvent,
    StoredRecord,
    VerifyReport,
    args_digest,
    build_event,
    canonical_json,
    checkpoint_mac,
    make_checkpoint,
    record_text,
    sha256_text,
    verify_ledger,
)
from tests.store.helpers import fill, finding

KEY = bytes(range(32))
LAB = "lab-test"
MISSING = "ab" * 32


# canonical bytes, hashes and signatures


def test_canonical_json_is_rfc_8785() -> None:
    value = {"b": [1.0, 1e21, "é\u2028"], "a": {"z": None, "y": True}, "c": -0.0}
    assert canonical_json(value) == '{"a":{"y":true,"z":null},"b":[1,1e+21,"é\u2028"],"c":0}'


def test_hashes_are_sha256_of_the_utf8_text() -> None:
    assert sha256_text("abc") == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )
    assert sha256_text("é") == hashlib.sha256("é".encode()).hexdigest()


def test_a_record_is_kept_as_its_canonical_json() -> None:
    record = finding("c").model_copy(update={"created_at": "2026-01-01T00:00:00+00:00"})
    text = record_text(record)
    assert text == canonical_json(json.loads(record.model_dump_json()))
    assert json.loads(text)["status"] == "unresolved"


def test_an_event_is_sealed_after_its_predecessor() -> None:
    draft = EventDraft(actor="a", role="human", action="x")
    event, stored = build_event(draft, 1, GENESIS_HASH, [])
    body = json.loads(stored.text)
    assert (body["seq"], body["prev_hash"], body["actor"]) == (1, "0" * 64, "a")
    assert stored.text == canonical_json(body)
    assert stored.hash == hashlib.sha256(stored.text.encode()).hexdigest()
    assert (stored.seq, event.seq, event.prev_hash) == (1, 1, GENESIS_HASH)


def test_a_checkpoint_signs_lab_sequence_and_head() -> None:
    message = b"rsilab-checkpoint\nlab-test\n7\n" + b"c" * 64
    expected = hmac.new(KEY, message, hashlib.sha256).hexdigest()
    assert checkpoint_mac(KEY, LAB, 7, "c" * 64) == expected
    signed = make_checkpoint(KEY, LAB, 7, "c" * 64)
    assert (signed.seq, signed.head_hash, signed.mac) == (7, "c" * 64, expected)


def test_a_report_keeps_the_first_bad_event() -> None:
    report = VerifyReport()
    assert report.ok and report.first_bad_seq is None
    report.fail(None, "no event")
    assert report.first_bad_seq is None and not report.ok
    report.fail(5, "five")
    report.fail(3, "three")
    report.fail(None, "none")
    assert report.first_bad_seq == 5
    assert report.problems == ["no event", "five", "three", "none"]


# verify_ledger over hand-built chains


def _chain(n: int) -> list[StoredEvent]:
    rows, prev = [], GENESIS_HASH
    for seq in range(1, n + 1):
        _, stored = build_event(EventDraft(actor="a", role="human", action="x"), seq, prev, [])
        rows.append(stored)
        prev = stored.hash
    return rows


def _verify(
    rows: list[StoredEvent],
    records: list[StoredRecord] | None = None,
    checkpoints: list[Checkpoint] | None = None,
    key: bytes | None = KEY,
) -> VerifyReport:
    return verify_ledger(rows, iter(records or []), checkpoints or [], key=key, lab_id=LAB)


def _signed(rows: list[StoredEvent], *seqs: int) -> list[Checkpoint]:
    return [make_checkpoint(KEY, LAB, s, rows[s - 1].hash) for s in seqs]


def test_a_whole_chain_verifies_and_counts() -> None:
    rows = _chain(4)
    report = _verify(rows, checkpoints=_signed(rows, 2, 4))
    assert (report.ok, report.events, report.head_hash) == (True, 4, rows[-1].hash)
    assert (report.checkpoints_checked, report.warnings) == (2, [])


def test_a_duplicated_event_is_named() -> None:
    rows = _chain(3)
    report = _verify([rows[0], rows[1], rows[1], rows[2]])
    assert report.problems == ["event 3: sequence jumps to 2 (events inserted or duplicated)"]
    assert report.first_bad_seq == 2


def test_a_removed_event_is_named() -> None:
    rows = _chain(3)
    report = _verify([rows[0], rows[2]])
    assert report.problems == ["event 2: sequence jumps to 3 (events removed)"]
    assert report.first_bad_seq == 2


def test_an_event_that_is_not_an_event_is_named() -> None:
    rows = _chain(2)
    text = '{"seq": 2}'
    report = _verify([rows[0], StoredEvent(2, sha256_text(text), text)])
    assert report.problems == ["event 2: not a valid event (ValidationError)"]
    assert report.first_bad_seq == 2


def test_an_event_after_a_rewritten_one_does_not_follow() -> None:
    rows = _chain(3)
    _, other = build_event(EventDraft(actor="b", role="human", action="x"), 2, rows[0].hash, [])
    report = _verify([rows[0], other, rows[2]])
    assert report.problems == [
        "event 3: does not follow event 2 (an event before it was edited, inserted or removed)"
    ]
    assert report.first_bad_seq == 3


def test_an_edited_record_is_named() -> None:
    record = finding("c")
    text = record_text(record)
    ref = RecordRef(id=record.id, kind="finding", rev=1, digest=sha256_text(text))
    draft = EventDraft(actor="a", role="human", action="x")
    _, stored = build_event(draft, 1, GENESIS_HASH, [ref])
    edited = StoredRecord(record.id, "finding", 1, text.replace('"c"', '"d"'))
    report = _verify([stored], [edited])
    assert report.problems == [
        f"record {record.id}: differs from what event-recorded revision 1 wrote "
        "(edited outside rsilab)"
    ]


def test_without_the_key_checkpoints_are_a_warning() -> None:
    rows = _chain(2)
    report = _verify(rows, checkpoints=_signed(rows, 2), key=None)
    assert report.ok and report.checkpoints_checked == 0
    assert not report.complete and report.key_missing and report.checkpoints_unchecked == 1
    assert report.warnings == [
        "1 checkpoint(s) not checked: the ledger key was not found (set RSILAB_LEDGER_KEY or "
        "RSILAB_KEY_DIR to where the lab's key is kept)"
    ]


@pytest.mark.parametrize("signed", [[], [2]])
def test_an_unsigned_tail_is_a_warning(signed: list[int]) -> None:
    rows = _chain(4)
    report = _verify(rows, checkpoints=_signed(rows, *signed))
    first = (signed[-1] if signed else 0) + 1
    assert report.ok
    assert report.warnings == [
        f"events {first}..4 come after the last signed checkpoint: they are hash-chained but "
        "an append there could not be told from a real one"
    ]


# verify_store: the watermark, the key folder, the blobs records name


def _commit(store: MemoryStore | SQLiteStore, *records: Record) -> None:
    store.commit(EventDraft(actor="t", role="controller", action="seed"), list(records))


@pytest.fixture
def artifacts(tmp_path: Path) -> ArtifactStore:
    blobs = ArtifactStore(tmp_path / "blobs")
    blobs.ensure()
    return blobs


def _naming(missing: str) -> list[tuple[Record, str]]:
    inputs = JobInputs(workspace_sha256=missing, seed=0)
    return [
        (Artifact(sha256=missing, artifact_kind="file", size=1), "sha256"),
        (Dataset(name="d", artifact_sha256=missing, artifact_kind="file"), "artifact_sha256"),
        (Experiment(direction_id="dir-000000000000", workspace_hash=missing), "workspace_hash"),
        (Job(kind="train", inputs=inputs), "inputs.workspace_sha256"),
        (
            Candidate(task="t", parent_version_id="ver-000000000000", harness_sha256=missing),
            "harness_sha256",
        ),
        (SystemVersion(label="H0/M0", harness_sha256=missing), "harness_sha256"),
    ]


@pytest.mark.parametrize("index", range(6), ids=lambda i: _naming(MISSING)[i][0].KIND)
def test_a_blob_any_record_type_names_must_be_kept(index: int, artifacts: ArtifactStore) -> None:
    record, field = _naming(MISSING)[index]
    store = MemoryStore(key=KEY)
    _commit(store, record)
    assert verify_store(store, KEY).ok  # blobs are checked only when asked
    report = verify_store(store, KEY, artifacts=artifacts)
    assert report.problems == [
        f"artifact {MISSING}: missing from the lab's blob folder (deleted, and no tombstone "
        f"says gc removed it); named by {record.id}.{field}"
    ]


def test_a_tombstone_excuses_only_records_written_before_it(artifacts: ArtifactStore) -> None:
    store = MemoryStore(key=KEY)
    dataset = Dataset(name="d", artifact_sha256=MISSING, artifact_kind="file")
    _commit(store, dataset)
    _commit(store, Tombstone(sha256=MISSING, size=1, reason="gc"))
    _commit(store, finding("unrelated, written later"))
    report = verify_store(store, KEY, artifacts=artifacts)
    assert report.ok and report.artifacts_checked == 0
    late = Artifact(sha256=MISSING, artifact_kind="file", size=1)
    _commit(store, late)
    report = verify_store(store, KEY, artifacts=artifacts)
    assert report.problems == [
        f"artifact {MISSING}: removed by gc at event 2, but {late.id}.sha256 named it "
        "afterwards (lost, not collected)"
    ]


def test_the_files_of_a_stored_tree_must_be_kept(artifacts: ArtifactStore, tmp_path: Path) -> None:
    folder = tmp_path / "tree"
    folder.mkdir()
    (folder / "a.txt").write_text("a")
    (folder / "b.txt").write_text("b")
    tree = artifacts.put_tree(folder).sha256
    store = MemoryStore(key=KEY)
    _commit(store, Artifact(sha256=tree, artifact_kind="tree", size=2))
    report = verify_store(store, KEY, artifacts=artifacts)
    assert report.ok and report.artifacts_checked == 3
    gone = hashlib.sha256(b"b").hexdigest()
    os.chmod(artifacts.blob_path(gone), 0o644)
    artifacts.blob_path(gone).unlink()
    report = verify_store(store, KEY, artifacts=artifacts)
    assert report.problems == [
        f"artifact {gone}: missing from the lab's blob folder (deleted, and no tombstone says "
        "gc removed it); a file of a tree"
    ]


def test_a_tree_whose_manifest_does_not_read_is_a_problem(artifacts: ArtifactStore) -> None:
    blob = artifacts.put_bytes(b"not a manifest").sha256
    store = MemoryStore(key=KEY)
    _commit(store, Artifact(sha256=blob, artifact_kind="tree", size=1))
    report = verify_store(store, KEY, artifacts=artifacts)
    assert report.problems == [f"artifact {blob}: not a readable tree manifest"]


def test_only_a_deep_verify_rehashes_blobs(artifacts: ArtifactStore) -> None:
    blob = artifacts.put_bytes(b"original").sha256
    store = MemoryStore(key=KEY)
    _commit(store, Artifact(sha256=blob, artifact_kind="file", size=8))
    path = artifacts.blob_path(blob)
    os.chmod(path, 0o644)
    path.write_bytes(b"edited!!")
    assert verify_store(store, KEY, artifacts=artifacts).ok
    deep = verify_store(store, KEY, artifacts=artifacts, deep=True)
    assert deep.problems == [f"artifact {blob}: content no longer matches its hash (edited)"]
    assert deep.artifacts_checked == 0


def _lab(folder: Path, events: int, *, plain_tail: int = 0) -> Path:
    """A closed SQLite lab (closing signs its head; every 64 events sign one too)."""
    path = folder / "lab.db"
    with SQLiteStore.open(path, create=True) as store:
        fill(store, events)
        fill(store, plain_tail, with_records=False)
    return path


def _raw(path: Path, *statements: str) -> None:
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        for statement in statements:
            conn.execute(statement)


def test_blobs_are_not_checked_when_the_ledger_already_failed(
    artifacts: ArtifactStore, tmp_path: Path
) -> None:
    path = tmp_path / "lab.db"
    with SQLiteStore.open(path, create=True) as store:
        _commit(store, Artifact(sha256=MISSING, artifact_kind="file", size=1))
    with SQLiteStore.open(path) as store:
        report = verify_store(store, bytes(32), artifacts=artifacts)  # the wrong key
    assert len(report.problems) == 1 and "signature invalid" in report.problems[0]


def test_the_watermark_counts_beside_the_checkpoints_left_in_the_lab(tmp_path: Path) -> None:
    # checkpoints at 64 (kept) and 70 (cut with the tail): only the watermark knows of 70
    path = _lab(tmp_path, 60, plain_tail=10)
    _raw(path, "DELETE FROM events WHERE seq > 66", "DELETE FROM checkpoints WHERE seq > 64")
    with SQLiteStore.open(path) as store:
        report = verify_store(store)
    assert report.first_bad_seq == 67
    assert report.problems[0].startswith(
        "ledger ends at event 66 but a signed checkpoint records event 70"
    )


def test_a_key_folder_can_be_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _lab(tmp_path, 3)
    moved = tmp_path / "moved-keys"
    os.replace(keys.key_dir(), moved)
    monkeypatch.setenv("RSILAB_KEY_DIR", str(tmp_path / "empty"))
    with SQLiteStore.open(path) as store:
        unkeyed = verify_store(store)
        keyed = verify_store(store, key_dir=moved)
    assert unkeyed.ok and unkeyed.checkpoints_checked == 0 and unkeyed.warnings
    assert keyed.ok and keyed.checkpoints_checked == 1 and keyed.warnings == []


def test_what_the_gc_event_itself_writes_is_not_after_it(artifacts: ArtifactStore) -> None:
    # gc rewrites the records it releases in its own event: they are not "written after"
    store = MemoryStore(key=KEY)
    job = Job(kind="train", inputs=JobInputs(workspace_sha256=MISSING, seed=0))
    _commit(store, job, Tombstone(sha256=MISSING, size=1, reason="gc"))
    assert verify_store(store, KEY, artifacts=artifacts).ok


def test_every_missing_edited_or_unreadable_blob_is_named(artifacts: ArtifactStore) -> None:
    store = MemoryStore(key=KEY)
    missing = ["cd" * 32, "ef" * 32]
    edited = [artifacts.put_bytes(f"blob {i}".encode()).sha256 for i in range(2)]
    unreadable = [artifacts.put_bytes(f"no tree {i}".encode()).sha256 for i in range(2)]
    for sha in edited:
        path = artifacts.blob_path(sha)
        os.chmod(path, 0o644)
        path.write_bytes(b"changed")
    records = [Artifact(sha256=sha, artifact_kind="file", size=1) for sha in missing + edited]
    records += [Artifact(sha256=sha, artifact_kind="tree", size=1) for sha in unreadable]
    _commit(store, *records)
    problems = verify_store(store, KEY, artifacts=artifacts, deep=True).problems
    assert sorted(p.split(":")[0] for p in problems) == sorted(
        f"artifact {sha}" for sha in missing + edited + unreadable
    )


def test_a_file_named_again_by_a_tree_is_checked_once(
    artifacts: ArtifactStore, tmp_path: Path
) -> None:
    folder = tmp_path / "tree"
    folder.mkdir()
    (folder / "model.bin").write_bytes(b"weights")
    tree = artifacts.put_tree(folder).sha256
    model = hashlib.sha256(b"weights").hexdigest()
    store = MemoryStore(key=KEY)
    # the version's model comes out of the pending blobs first, then the tree names it again;
    # the missing blob is checked after both
    _commit(
        store,
        Artifact(sha256=MISSING, artifact_kind="file", size=1),
        Dataset(name="d", artifact_sha256=tree, artifact_kind="tree"),
        SystemVersion(label="H0/M0", harness_sha256=tree, model_sha256=model),
    )
    report = verify_store(store, KEY, artifacts=artifacts)
    assert report.artifacts_checked == 2
    assert [p.split(":")[0] for p in report.problems] == [f"artifact {MISSING}"]


def test_the_watermark_is_read_from_the_named_key_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _lab(tmp_path, 60, plain_tail=10)
    _raw(path, "DELETE FROM events WHERE seq > 60", "DELETE FROM checkpoints WHERE seq > 60")
    moved = tmp_path / "moved-keys"
    os.replace(keys.key_dir(), moved)
    monkeypatch.setenv("RSILAB_KEY_DIR", str(tmp_path / "empty"))
    with SQLiteStore.open(path) as store:
        report = verify_store(store, key_dir=moved)
    assert report.first_bad_seq == 61
    assert "signed checkpoint records event 70" in report.problems[0]


def test_a_record_stored_under_another_kind_is_named(tmp_path: Path) -> None:
    path = _lab(tmp_path, 2)
    with SQLiteStore.open(path) as store:
        ids = sorted(r.id for r in store.stored_records())
    _raw(path, "UPDATE records SET kind = 'direction'")
    with SQLiteStore.open(path) as store:
        report = verify_store(store)
    assert sorted(report.problems) == [
        f"record {i} (table records, stored as kind 'direction'): its id is of kind "
        "'finding' (edited outside rsilab)"
        for i in ids
    ]
    assert report.first_bad_seq is None


def test_a_record_that_no_longer_parses_is_named(tmp_path: Path) -> None:
    # written whole by rsilab (the ledger agrees), but no longer what its kind's model reads:
    # as a record written before a field became required would be
    path = tmp_path / "lab.db"
    broken = [finding("a").model_construct(claim="a"), finding("b").model_construct(claim="b")]
    for record in broken:
        record.id = record.id or f"fnd-{os.urandom(6).hex()}"
    with SQLiteStore.open(path, create=True) as store:
        _commit(store, *broken)
    with SQLiteStore.open(path) as store:
        report = verify_store(store)
    assert sorted(report.problems) == sorted(
        f"record {r.id} (table records, stored as kind 'finding'): does not parse (ValidationError)"
        for r in broken
    )


def test_arguments_have_a_digest_whatever_they_are() -> None:
    assert args_digest({"b": 1, "a": [2]}) == sha256_text('{"a":[2],"b":1}')
    odd = {1.5j}
    assert args_digest(odd) == sha256_text(repr(odd))

    class Unprintable:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert args_digest(Unprintable()) == sha256_text("<unrepresentable Unprintable>")


def _scrambled_events(tmp_path: Path) -> Path:
    """A closed lab whose events table has a page of garbage, as a disk fault leaves it."""
    path = _lab(tmp_path, 6)
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        (page,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'events'"
        ).fetchone()
    data = bytearray(path.read_bytes())
    start = (int(page) - 1) * 4096
    for i in range(start + 8, start + 4096, 3):
        data[i] ^= 0xA5
    path.write_bytes(bytes(data))
    return path


def test_a_damaged_database_is_a_problem_per_damage_found(tmp_path: Path) -> None:
    path = _scrambled_events(tmp_path)
    with SQLiteStore.open(path) as store:
        report = verify_store(store)
    assert len(report.problems) > 1 and report.first_bad_seq is None
    assert all(p.startswith(f"{path} is damaged: ") for p in report.problems)
    assert report.problems[0].startswith(f"{path} is damaged: table events: ")


def test_damage_the_database_check_misses_is_still_a_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a page SQLite's own check passes but reading fails on: a report, never an exception
    path = _scrambled_events(tmp_path)
    with SQLiteStore.open(path) as store:
        monkeypatch.setattr(store, "damage", list)
        report = verify_store(store)
    assert len(report.problems) == 1 and report.first_bad_seq is None
    assert report.problems[0].startswith(f"the lab database {path} is damaged (")
