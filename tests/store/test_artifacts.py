"""Content-addressed artifacts: dedupe, read-only blobs, tree hashes, round trips, failures."""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rsilab.errors import LabError, NotFoundError, WriteRefused
from rsilab.store import ArtifactStore
from rsilab.store.artifacts import CHUNK
from rsilab.store.ledger import canonical_json
from rsilab.store.trees import TreeRefused
from tests.disks import AS_ROOT, fill, small_tmpfs


@pytest.fixture
def artifacts(tmp_path: Path) -> ArtifactStore:
    store = ArtifactStore(tmp_path / "lab")
    store.ensure()
    return store


def blob_files(store: ArtifactStore) -> list[Path]:
    return sorted(p for p in (store.root / "blobs").rglob("*") if p.is_file())


def tmp_files(store: ArtifactStore) -> list[Path]:
    return sorted((store.root / "tmp").iterdir())


def make_tree(root: Path) -> Path:
    """A small tree: nested files, an executable, a link inside and a link outside the tree."""
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "README").write_text("hello\n")
    (root / "pkg" / "model.py").write_text("print('model')\n")
    (root / "pkg" / "sub" / "data.bin").write_bytes(bytes(range(256)))
    (root / "run.sh").write_text("#!/bin/sh\necho run\n")
    (root / "run.sh").chmod(0o755)
    (root / "pkg" / "model.py").chmod(0o644)
    os.symlink("pkg/model.py", root / "link-to-model")
    os.symlink("/etc", root / "link-outside")
    return root


def test_put_bytes_dedupes(artifacts: ArtifactStore, tmp_path: Path) -> None:
    data = b"some bytes\n"
    source = tmp_path / "file.txt"
    source.write_bytes(data)

    first = artifacts.put_bytes(data)
    second = artifacts.put_bytes(data)
    third = artifacts.put_file(source)

    assert first == second == third
    assert (first.sha256, first.kind, first.size) == (
        hashlib.sha256(data).hexdigest(),
        "file",
        len(data),
    )
    assert blob_files(artifacts) == [artifacts.blob_path(first.sha256)]
    assert artifacts.read_bytes(first.sha256) == data
    assert artifacts.has(first.sha256)
    assert tmp_files(artifacts) == []


def test_large_file_is_stored_in_chunks(artifacts: ArtifactStore, tmp_path: Path) -> None:
    data = os.urandom(2 * CHUNK + 17)
    source = tmp_path / "big.bin"
    source.write_bytes(data)

    stored = artifacts.put(source)

    assert (stored.sha256, stored.size) == (hashlib.sha256(data).hexdigest(), len(data))
    assert artifacts.verify_blob(stored.sha256)


def test_blobs_are_read_only(artifacts: ArtifactStore) -> None:
    stored = artifacts.put_bytes(b"frozen")

    mode = artifacts.blob_path(stored.sha256).stat().st_mode
    assert stat.S_IMODE(mode) == 0o444


def test_empty_file_has_an_address(artifacts: ArtifactStore) -> None:
    stored = artifacts.put_bytes(b"")

    assert stored.sha256 == hashlib.sha256(b"").hexdigest()
    assert artifacts.read_bytes(stored.sha256) == b""


def test_tree_hash_is_stable_across_copies(artifacts: ArtifactStore, tmp_path: Path) -> None:
    original = make_tree(tmp_path / "a")
    copy = tmp_path / "b"
    shutil.copytree(original, copy, symlinks=True)

    first, second = artifacts.put_tree(original), artifacts.put_tree(copy)

    assert first.sha256 == second.sha256
    assert first.kind == "tree"
    files = ["README", "pkg/model.py", "pkg/sub/data.bin", "run.sh"]
    assert first.size == sum((original / name).stat().st_size for name in files)
    assert artifacts.put(original).sha256 == first.sha256
    assert [e["path"] for e in first.manifest] == [
        "README",
        "link-outside",
        "link-to-model",
        "pkg/model.py",
        "pkg/sub/data.bin",
        "run.sh",
    ]


def _edit_content(root: Path) -> None:
    (root / "pkg" / "model.py").write_text("print('better model')\n")


def _make_executable(root: Path) -> None:
    (root / "pkg" / "model.py").chmod(0o755)


def _retarget_link(root: Path) -> None:
    (root / "link-to-model").unlink()
    os.symlink("README", root / "link-to-model")


def _rename(root: Path) -> None:
    (root / "README").rename(root / "README.md")


def _add_empty_file(root: Path) -> None:
    (root / "pkg" / "empty").write_bytes(b"")


@pytest.mark.parametrize(
    "change", [_edit_content, _make_executable, _retarget_link, _rename, _add_empty_file]
)
def test_tree_hash_changes_with_the_tree(
    artifacts: ArtifactStore, tmp_path: Path, change: Callable[[Path], None]
) -> None:
    original = make_tree(tmp_path / "a")
    before = artifacts.put_tree(original).sha256

    change(original)

    assert artifacts.put_tree(original).sha256 != before


def test_tree_ignores_group_and_other_permission_bits(
    artifacts: ArtifactStore, tmp_path: Path
) -> None:
    original = make_tree(tmp_path / "a")
    before = artifacts.put_tree(original).sha256

    (original / "README").chmod(0o600)

    assert artifacts.put_tree(original).sha256 == before


def test_symlinks_are_recorded_not_followed(artifacts: ArtifactStore, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("do not copy me")
    root = tmp_path / "tree"
    root.mkdir()
    (root / "file").write_text("x")
    os.symlink(outside, root / "dir-link")
    os.symlink(outside / "secret.txt", root / "file-link")

    stored = artifacts.put_tree(root)

    entries: dict[str, dict[str, Any]] = {e["path"]: e for e in stored.manifest}
    assert entries["dir-link"] == {"path": "dir-link", "link": str(outside)}
    assert entries["file-link"] == {"path": "file-link", "link": str(outside / "secret.txt")}
    assert set(entries) == {"file", "dir-link", "file-link"}
    assert not artifacts.has(hashlib.sha256(b"do not copy me").hexdigest())
    assert stored.size == 1


def test_special_files_are_refused(artifacts: ArtifactStore, tmp_path: Path) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    os.mkfifo(root / "pipe")

    with pytest.raises(TreeRefused, match="'pipe' is a FIFO"):  # named, never opened
        artifacts.put_tree(root)


def test_materialize_file_round_trip(artifacts: ArtifactStore, tmp_path: Path) -> None:
    stored = artifacts.put_bytes(b"payload")

    out = artifacts.materialize(stored.sha256, tmp_path / "out" / "deep" / "file.bin", "file")

    assert out.read_bytes() == b"payload"
    out.write_bytes(b"the copy is writable, the blob stays intact")
    assert artifacts.verify_blob(stored.sha256)


def test_materialize_tree_round_trip(artifacts: ArtifactStore, tmp_path: Path) -> None:
    original = make_tree(tmp_path / "a")
    stored = artifacts.put_tree(original)

    out = artifacts.materialize(stored.sha256, tmp_path / "restored", "tree")

    assert (out / "README").read_text() == "hello\n"
    assert (out / "pkg" / "sub" / "data.bin").read_bytes() == bytes(range(256))
    assert stat.S_IMODE((out / "run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((out / "pkg" / "model.py").stat().st_mode) == 0o644
    assert (out / "link-to-model").is_symlink()
    assert os.readlink(out / "link-to-model") == "pkg/model.py"
    assert os.readlink(out / "link-outside") == "/etc"
    assert artifacts.put_tree(out).sha256 == stored.sha256
    assert artifacts.manifest(stored.sha256) == list(stored.manifest)


def test_materialize_refuses_an_existing_destination(
    artifacts: ArtifactStore, tmp_path: Path
) -> None:
    stored = artifacts.put_tree(make_tree(tmp_path / "a"))
    (tmp_path / "taken").mkdir()

    with pytest.raises(FileExistsError):
        artifacts.materialize(stored.sha256, tmp_path / "taken", "tree")


@pytest.mark.parametrize(
    "entries",
    [
        [{"path": "../escaped", "mode": 420}],
        [{"path": "/abs/escaped", "mode": 420}],
        [{"path": "a", "link": "{outside}"}, {"path": "a/escaped", "mode": 420}],
        [{"path": "a", "link": ".."}, {"path": "a/escaped", "link": "x"}],
    ],
)
def test_materialize_refuses_paths_that_leave_the_destination(
    artifacts: ArtifactStore, tmp_path: Path, entries: list[dict[str, Any]]
) -> None:
    payload = artifacts.put_bytes(b"payload")
    outside = tmp_path / "outside"
    outside.mkdir()
    for entry in entries:
        if "mode" in entry:
            entry.update(sha256=payload.sha256, size=payload.size)
        if entry.get("link") == "{outside}":
            entry["link"] = str(outside)
    manifest = artifacts.put_bytes(canonical_json({"tree": entries}).encode())

    with pytest.raises(LabError, match="unsafe path"):
        artifacts.materialize(manifest.sha256, tmp_path / "dest", "tree")

    assert list(outside.iterdir()) == []
    assert not (tmp_path / "escaped").exists()


def test_manifest_of_a_plain_file_is_not_found(artifacts: ArtifactStore) -> None:
    stored = artifacts.put_bytes(b"not a manifest")

    with pytest.raises(NotFoundError):
        artifacts.manifest(stored.sha256)


@pytest.mark.parametrize(
    "address",
    [
        "../../etc/passwd",
        "ab" * 31,
        "AB" * 32,
        "zz" * 32,
        "ab" * 32 + "/",
        "ab" * 31 + "/.",
        "",
    ],
)
def test_blob_path_refuses_non_hex_addresses(artifacts: ArtifactStore, address: str) -> None:
    with pytest.raises(NotFoundError):
        artifacts.blob_path(address)
    with pytest.raises(NotFoundError):
        artifacts.read_bytes(address)
    assert not artifacts.has(address)


def test_missing_blob_is_not_found(artifacts: ArtifactStore) -> None:
    with pytest.raises(NotFoundError):
        artifacts.read_bytes("00" * 32)
    assert not artifacts.has("00" * 32)


def test_verify_blob_detects_corruption(artifacts: ArtifactStore) -> None:
    stored = artifacts.put_bytes(b"original bytes")
    assert artifacts.verify_blob(stored.sha256)
    blob = artifacts.blob_path(stored.sha256)

    blob.chmod(0o644)
    blob.write_bytes(b"tampered bytes")

    assert not artifacts.verify_blob(stored.sha256)


# -- failing disks -----------------------------------------------------------------------------


class _FullFile:
    """A file whose second write fails as a full disk does."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._writes = 0

    def __enter__(self) -> _FullFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._inner.close()

    def write(self, data: bytes) -> int:
        self._writes += 1
        if self._writes > 1:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return int(self._inner.write(data))


def _full_on_write(monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.fdopen
    monkeypatch.setattr(os, "fdopen", lambda fd, *a, **k: _FullFile(real(fd, *a, **k)))


def _full_on_rename(monkeypatch: pytest.MonkeyPatch) -> None:
    def replace(src: object, dst: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", replace)


@pytest.mark.parametrize("fail", [_full_on_write, _full_on_rename])
def test_full_disk_leaves_no_partial_blob(
    artifacts: ArtifactStore,
    monkeypatch: pytest.MonkeyPatch,
    fail: Callable[[pytest.MonkeyPatch], None],
) -> None:
    kept = artifacts.put_bytes(b"already stored")
    data = os.urandom(CHUNK + 100)  # two chunks, so the write fails halfway
    fail(monkeypatch)

    with pytest.raises(LabError) as info:
        artifacts.put_bytes(data)

    monkeypatch.undo()
    assert "no space left" in info.value.message
    assert info.value.hint.startswith("free space")
    assert tmp_files(artifacts) == []
    assert not artifacts.has(hashlib.sha256(data).hexdigest())
    assert blob_files(artifacts) == [artifacts.blob_path(kept.sha256)]
    assert artifacts.put_bytes(data).size == len(data)  # works once there is room


@AS_ROOT
def test_an_artifact_larger_than_the_free_space_of_a_real_disk_is_refused_whole(
    tmp_path: Path,
) -> None:
    with small_tmpfs(tmp_path / "disk", size_mb=8) as disk:
        store = ArtifactStore(disk / "lab")
        store.ensure()
        kept = store.put_bytes(b"recorded before the disk filled")
        filler = fill(disk, leave_kib=1024)
        data = os.urandom(3 * 2**20)
        with pytest.raises(WriteRefused) as info:
            store.put_bytes(data)
        assert info.value.message.startswith(f"cannot write {disk}/lab: no space left on the dev")
        assert "an artifact could not be stored there" in info.value.message
        assert info.value.hint.startswith(f"free space on {disk}, then")
        assert tmp_files(store) == []
        assert blob_files(store) == [store.blob_path(kept.sha256)]
        filler.unlink()
        assert store.read_bytes(kept.sha256) == b"recorded before the disk filled"
        assert store.put_bytes(data).size == len(data)


def test_permission_error_is_explained(
    artifacts: ArtifactStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def replace(src: object, dst: object) -> None:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    monkeypatch.setattr(os, "replace", replace)

    with pytest.raises(LabError, match="permission denied"):
        artifacts.put_bytes(b"x")

    monkeypatch.undo()
    assert tmp_files(artifacts) == []


def test_materialize_a_missing_blob_raises_not_found(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "lab")
    store.ensure()
    with pytest.raises(NotFoundError):
        store.materialize("0" * 64, tmp_path / "out.bin", "file")
    with pytest.raises(NotFoundError):
        store.materialize("1" * 64, tmp_path / "out-tree", "tree")


def test_half_written_ingests_of_dead_processes_are_removed(tmp_path: Path) -> None:
    """A process killed mid-ingest leaves ``tmp/in-<pid>-*``; only a dead pid's go."""
    store = ArtifactStore(tmp_path)
    store.ensure()
    dead, live = tmp_path / "tmp" / "in-999999-abc", tmp_path / "tmp" / "in-4242-def"
    dead.write_bytes(b"half")
    live.write_bytes(b"still writing")
    removed = store.remove_stale_ingests(lambda pid: pid == 999999)
    assert removed == [dead] and not dead.exists() and live.exists()


def test_a_tree_can_leave_out_caches_and_bytecode(artifacts: ArtifactStore, tmp_path: Path) -> None:
    """A baseline's harness is stored without what Python, pytest, mypy and ruff make again."""
    tree = tmp_path / "harness"
    for rel in (
        "predict.py",
        "pkg/model.py",
        "pkg/__pycache__/model.cpython-311.pyc",
        "__pycache__/predict.cpython-311.pyc",
        "old.pyc",
        "notes.pyo",
        ".pytest_cache/v/cache/lastfailed",
        ".mypy_cache/3.11/x.json",
        ".ruff_cache/0.1/y",
        "node_modules/lib/index.js",
    ):
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(rel)
    kept = artifacts.put_tree(tree, leave_out_caches=True)
    assert [e["path"] for e in kept.manifest] == [
        "node_modules/lib/index.js",
        "pkg/model.py",
        "predict.py",
    ]
    assert len(artifacts.put_tree(tree).manifest) == 10
