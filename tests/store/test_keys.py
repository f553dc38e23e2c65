"""The key and watermark kept outside the lab."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rsilab.errors import LabError
from rsilab.store import MemoryStore, SQLiteStore, keys, verify_store
from rsilab.store.ledger import make_checkpoint
from tests.store.helpers import draft, fill


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


def test_a_mark_cut_short_leaves_the_one_before(isolated_environment: Path) -> None:
    key = keys.create_key("lab-t")
    for seq in (5, 6, 7):
        keys.raise_watermark("lab-t", make_checkpoint(key, "lab-t", seq, f"{seq}" * 64))
    path = isolated_environment / "lab-t.watermark.json"
    raw = path.read_bytes()
    # a power cut while mark 7 was written: its slot holds half of it
    half = raw.index(b'"seq": 7') + 4
    slot = half - half % 512
    path.write_bytes(raw[:half] + b"\0" * (slot + 512 - half) + raw[slot + 512 :])

    mark = keys.load_watermark("lab-t")

    assert mark is not None and (mark.seq, mark.head_hash) == (6, "6" * 64)


def test_a_single_mark_file_is_read_and_raised(isolated_environment: Path) -> None:
    key = keys.create_key("lab-s")
    # the shape a backup writes (and older rsilab did): one JSON object, nothing else
    old = make_checkpoint(key, "lab-s", 64, "a" * 64)
    (isolated_environment / "lab-s.watermark.json").write_text(json.dumps(old.__dict__))
    assert keys.load_watermark("lab-s") == old

    keys.raise_watermark("lab-s", make_checkpoint(key, "lab-s", 65, "b" * 64))
    keys.raise_watermark("lab-s", make_checkpoint(key, "lab-s", 63, "c" * 64))

    mark = keys.load_watermark("lab-s")
    assert mark is not None and (mark.seq, mark.head_hash) == (65, "b" * 64)


def test_a_key_folder_that_cannot_take_the_mark_refuses_the_first_write(
    tmp_path: Path, isolated_environment: Path
) -> None:
    with SQLiteStore.open(tmp_path / "lab.db", create=True) as store:
        lab_id = store.lab_id
    mark = isolated_environment / f"{lab_id}.watermark.json"
    mark.mkdir()  # a file nobody can open for writing, whoever runs the test (root included)

    with (
        SQLiteStore.open(tmp_path / "lab.db") as store,
        pytest.raises(LabError, match=r"cannot be written .*; nothing was written"),
    ):
        store.commit(draft("never recorded"))
    with SQLiteStore.open(tmp_path / "lab.db") as store:
        assert store.head()[0] == 0


def test_a_mark_lost_after_its_commit_says_the_event_was_recorded(
    tmp_path: Path, isolated_environment: Path
) -> None:
    with SQLiteStore.open(tmp_path / "lab.db", create=True) as store:
        store.commit(draft("first"))
        mark = isolated_environment / f"{store.lab_id}.watermark.json"
        mark.unlink()
        mark.mkdir()

        with pytest.raises(LabError, match="event 2 was recorded, but its signed mark"):
            store.commit(draft("second"))

        assert store.head()[0] == 2


def test_a_mark_held_by_a_paused_process_ends_in_one_error_not_a_wait_for_ever(
    tmp_path: Path, isolated_environment: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holding the watermark's lock (as one stopped mid-mark does) makes a
    writer fail after the bounded wait, saying its event was recorded; once it lets go,
    writes go on."""
    with SQLiteStore.open(tmp_path / "lab.db", create=True) as store:
        store.commit(draft("first"))
        mark = isolated_environment / f"{store.lab_id}.watermark.json"
        with subprocess.Popen(
            [sys.executable, "-c", _HOLD_LOCK, str(mark)], stdout=subprocess.PIPE, text=True
        ) as holder:
            try:
                assert holder.stdout is not None and holder.stdout.readline() == "held\n"
                monkeypatch.setattr(keys, "MARK_LOCK_TIMEOUT_S", 0.3)
                with pytest.raises(LabError, match=r"event 2 was recorded.*held the lab's"):
                    store.commit(draft("second"))
            finally:
                holder.kill()
        store.commit(draft("third"))
        marked = keys.load_watermark(store.lab_id)
        assert marked is not None and (marked.seq, marked.head_hash) == store.head()


_HOLD_LOCK = """
import fcntl, sys, time
handle = open(sys.argv[1], "rb")
fcntl.flock(handle, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(600)
"""


def test_marks_of_many_labs_in_one_process_each_follow_their_head(tmp_path: Path) -> None:
    stores = [SQLiteStore.open(tmp_path / f"lab{i}.db", create=True) for i in range(20)]
    try:
        for round_ in range(3):
            for store in stores:
                store.commit(draft(f"round {round_}"))
        for store in stores:
            mark = keys.load_watermark(store.lab_id)
            assert mark is not None and (mark.seq, mark.head_hash) == store.head()
    finally:
        for store in stores:
            store.close()
