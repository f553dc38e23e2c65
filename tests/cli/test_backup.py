"""``rsilab backup DEST``: a copy that verifies, taken while the lab is written to."""

from __future__ import annotations

import json
import shutil
import sqlite3
import stat
import threading
from contextlib import closing
from pathlib import Path

import pytest

from rsilab.records import EventDraft
from rsilab.store import Lab
from tests.cli.helpers import explain, rsilab


def _events(db: Path) -> list[tuple[int, str]]:
    with closing(sqlite3.connect(db)) as conn:
        return [(int(s), str(h)) for s, h in conn.execute("SELECT seq, hash FROM events")]


def _lab_id(lab: Path) -> str:
    with closing(sqlite3.connect(lab / "lab.db")) as conn:
        (value,) = conn.execute("SELECT value FROM meta WHERE key = 'lab_id'").fetchone()
    return str(value)


@pytest.fixture
def used_lab(lab: Path, campaign_id: str) -> Path:
    """A lab with a blob, a task secret and settings, as a campaign leaves it."""
    with Lab.open(lab) as opened:
        opened.artifacts.put_bytes(b"a model")
    (lab / "task-secret").write_text("ab" * 32)
    (lab / "rsilab.toml").write_text("[lab]\n")
    (lab / "workspaces" / campaign_id).mkdir(parents=True)
    (lab / "workspaces" / campaign_id / "notes.txt").write_text("scratch")
    return lab


def test_the_copy_holds_the_lab_and_verifies(
    used_lab: Path, tmp_path: Path, isolated_environment: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dest = tmp_path / "backup"
    result = rsilab("backup", str(dest), "--lab", used_lab)
    assert result.exit_code == 0, explain(result)
    copy, lab_id = dest / "lab", _lab_id(used_lab)
    assert _events(copy / "lab.db") == _events(used_lab / "lab.db")
    assert (copy / "task-secret").read_text() == "ab" * 32
    assert (copy / "rsilab.toml").read_text() == "[lab]\n"
    assert sorted(p.name for p in (copy / "blobs").rglob("*") if p.is_file()) == sorted(
        p.name for p in (used_lab / "blobs").rglob("*") if p.is_file()
    )
    assert not (copy / "workspaces").exists()  # scratch, unless --workspaces
    assert stat.S_IMODE(copy.stat().st_mode) == 0o700  # the task secret is in it
    key = dest / "keys" / f"{lab_id}.key"
    assert key.read_bytes() == (isolated_environment / f"{lab_id}.key").read_bytes()
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    manifest = json.loads((dest / "backup.json").read_text())
    assert manifest["lab_id"] == lab_id and manifest["verified"] is True

    # the copy is a lab of its own: it verifies from where it lies, with the copied key
    monkeypatch.setenv("RSILAB_KEY_DIR", str(dest / "keys"))
    checked = rsilab("verify", "--deep", "--lab", copy)
    assert checked.exit_code == 0, explain(checked)


def test_workspaces_on_request_and_the_key_left_out(used_lab: Path, tmp_path: Path) -> None:
    dest = tmp_path / "backup"
    result = rsilab("backup", str(dest), "--workspaces", "--no-key", "--lab", used_lab)
    assert result.exit_code == 0, explain(result)
    assert [p.name for p in (dest / "lab" / "workspaces").rglob("*.txt")] == ["notes.txt"]
    assert not list((dest / "keys").glob("*.key"))


@pytest.mark.parametrize("existing", ["file", "folder"])
def test_an_existing_destination_is_refused(lab: Path, tmp_path: Path, existing: str) -> None:
    dest = tmp_path / "taken"
    if existing == "file":
        dest.write_text("x")
    else:
        dest.mkdir()
        (dest / "old").write_text("x")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    result = rsilab("backup", str(dest), "--lab", lab)
    assert result.exit_code == 2, explain(result)
    assert "not an empty folder" in result.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_an_empty_destination_is_used(lab: Path, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = rsilab("backup", str(tmp_path / "empty"), "--lab", lab)
    assert result.exit_code == 0, explain(result)


def test_a_destination_inside_the_lab_is_refused(lab: Path) -> None:
    result = rsilab("backup", str(lab / "copy"), "--lab", lab)
    assert result.exit_code == 2, explain(result)
    assert not (lab / "copy").exists()


def test_a_copy_missing_a_blob_fails_verification(used_lab: Path, tmp_path: Path) -> None:
    with Lab.open(used_lab) as opened:
        sha = opened.artifacts.put_bytes(b"named by a record").sha256
        opened.store.commit(
            EventDraft(actor="cli", role="human", action="artifact_registered"),
            [_artifact(sha)],
        )
    blob = used_lab / "blobs" / sha[:2] / sha[2:]
    blob.chmod(0o644)
    blob.unlink()  # lost: no tombstone says gc removed it
    result = rsilab("backup", str(tmp_path / "backup"), "--lab", used_lab)
    assert result.exit_code == 3, explain(result)
    assert "FAILED" in result.stdout and sha in result.stdout


def test_a_copy_that_cannot_be_written_is_a_runtime_failure(
    lab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(shutil, "copy2", full)
    (lab / "rsilab.toml").write_text("[lab]\n")
    dest = tmp_path / "backup"
    result = rsilab("backup", str(dest), "--lab", lab)
    assert result.exit_code == 1, explain(result)
    assert "No space left" in result.stderr
    assert not dest.exists()  # no half copy left to be mistaken for a backup


def test_a_lab_written_to_during_the_backup_gives_a_consistent_copy(
    lab: Path, tmp_path: Path
) -> None:
    stop = threading.Event()
    written = [0]

    def writer() -> None:
        with Lab.open(lab) as opened:
            while not stop.is_set():
                opened.store.commit(EventDraft(actor="cli", role="human", action="note"))
                written[0] += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        result = rsilab("backup", str(tmp_path / "backup"), "--json", "--lab", lab)
    finally:
        stop.set()
        thread.join()
    assert result.exit_code == 0, explain(result)
    copied = _events(tmp_path / "backup" / "lab" / "lab.db")
    assert copied == _events(lab / "lab.db")[: len(copied)]  # a prefix of the live ledger
    assert json.loads(result.stdout)["verify"]["events"] == len(copied)


def _artifact(sha: str) -> object:
    from rsilab.records import Artifact

    return Artifact(name="model", sha256=sha, artifact_kind="file", size=17)
