"""The lab folder: creating, opening, and finding it."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from rsilab.errors import LabError
from rsilab.records import Artifact, EventDraft
from rsilab.store import Lab, SQLiteStore, keys, resolve_lab_path, verify_store
from tests.store.helpers import draft


def test_init_creates_the_lab(tmp_path: Path, isolated_environment: Path) -> None:
    folder = tmp_path / "nested" / "lab"

    with Lab.init(folder) as lab:
        assert lab.path == folder
        assert isinstance(lab.store, SQLiteStore)
        assert (folder / "lab.db").is_file()
        assert (folder / "blobs").is_dir()
        assert (isolated_environment / f"{lab.store.lab_id}.key").is_file()
        assert keys.load_key(lab.store.lab_id) is not None
        events = lab.store.events()
        assert [(e.seq, e.action) for e in events] == [(1, "lab_created")]
        assert events[0].detail == str(folder)
        assert lab.artifacts.read_bytes(lab.artifacts.put_bytes(b"x").sha256) == b"x"
        assert verify_store(lab.store).ok
    assert not (folder / ".write-test").exists()


def test_key_file_is_private(tmp_path: Path, isolated_environment: Path) -> None:
    with Lab.init(tmp_path / "lab") as lab:
        key_file = isolated_environment / f"{lab.store.lab_id}.key"
    assert key_file.stat().st_mode & 0o077 == 0


def test_the_lab_folder_is_its_owners_alone(tmp_path: Path) -> None:
    """Mode 0700: no other uid (a sandbox's above all) lists or reads it by its host path;
    a lab made looser before is tightened when opened."""
    with Lab.init(tmp_path / "lab"):
        pass
    assert stat.S_IMODE((tmp_path / "lab").stat().st_mode) == 0o700
    (tmp_path / "lab").chmod(0o755)
    with Lab.open(tmp_path / "lab"):
        assert stat.S_IMODE((tmp_path / "lab").stat().st_mode) == 0o700


def test_init_twice_is_refused(tmp_path: Path) -> None:
    with Lab.init(tmp_path / "lab") as lab:
        lab_id = lab.store.lab_id

    with pytest.raises(LabError, match="already exists"):
        Lab.init(tmp_path / "lab")

    with Lab.open(tmp_path / "lab") as lab:
        assert lab.store.lab_id == lab_id
        assert lab.store.head()[0] == 1


def test_init_where_no_folder_can_be_made(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")

    with pytest.raises(LabError) as info:
        Lab.init(blocker / "lab")

    assert "cannot create a lab" in info.value.message
    assert "--lab" in info.value.hint


def test_open_missing_lab_hints_at_init(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"

    with pytest.raises(LabError) as info:
        Lab.open(missing)

    assert "no rsilab lab" in info.value.message
    assert "rsilab init" in info.value.hint
    assert str(missing) in info.value.hint
    assert not missing.exists()


def test_open_sees_what_an_earlier_lab_wrote(tmp_path: Path) -> None:
    with Lab.init(tmp_path / "lab") as lab:
        lab.store.commit(draft("second"))
        blob = lab.artifacts.put_bytes(b"kept").sha256

    with Lab.open(tmp_path / "lab") as lab:
        assert [e.detail for e in lab.store.events()][-1] == "second"
        assert lab.artifacts.read_bytes(blob) == b"kept"
        report = verify_store(lab.store)
        assert report.ok, report.problems
        assert report.checkpoints_checked >= 1  # closing the first Lab signed its head


def test_resolve_lab_path_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_lab_path() == Path(".rsilab")
    assert resolve_lab_path("") == Path(".rsilab")

    monkeypatch.setenv("RSILAB_LAB", str(tmp_path / "from-env"))
    assert resolve_lab_path() == tmp_path / "from-env"
    assert resolve_lab_path(None) == tmp_path / "from-env"

    assert resolve_lab_path("explicit") == Path("explicit")
    assert resolve_lab_path(tmp_path / "explicit") == tmp_path / "explicit"

    monkeypatch.setenv("RSILAB_LAB", "")
    assert resolve_lab_path() == Path(".rsilab")


def test_init_and_open_follow_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RSILAB_LAB", str(tmp_path / "env-lab"))
    with Lab.init() as lab:
        lab_id = lab.store.lab_id
    assert (tmp_path / "env-lab" / "lab.db").is_file()

    with Lab.open() as lab:
        assert lab.store.lab_id == lab_id


def test_default_lab_is_in_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with Lab.init() as lab:
        assert lab.path == Path(".rsilab")
    assert (tmp_path / ".rsilab" / "lab.db").is_file()


def test_verify_with_artifacts_catches_missing_and_edited_blobs(tmp_path: Path) -> None:
    with Lab.init(tmp_path / "lab") as lab:
        folder = tmp_path / "tree"
        (folder / "sub").mkdir(parents=True)
        (folder / "sub" / "a.txt").write_text("alpha")
        stored = lab.artifacts.put_tree(folder)
        art = Artifact(sha256=stored.sha256, artifact_kind="tree", size=stored.size)
        lab.store.commit(EventDraft(actor="t", role="human", action="test"), [art])
        report = verify_store(lab.store, artifacts=lab.artifacts, deep=True)
        assert report.ok and report.artifacts_checked == 2

        file_sha = stored.manifest[0]["sha256"]
        blob = lab.artifacts.blob_path(file_sha)
        blob.chmod(0o644)
        blob.write_text("tampered")
        assert verify_store(lab.store, artifacts=lab.artifacts).ok  # shallow: present
        deep = verify_store(lab.store, artifacts=lab.artifacts, deep=True)
        assert not deep.ok and "edited" in deep.problems[0]

        blob.unlink()
        missing = verify_store(lab.store, artifacts=lab.artifacts)
        assert not missing.ok and file_sha in missing.problems[0]
