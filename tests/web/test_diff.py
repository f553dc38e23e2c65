"""Workspace diffs between two stored trees."""

from __future__ import annotations

from pathlib import Path

import pytest

from rsilab.errors import NotFoundError
from rsilab.store.artifacts import ArtifactStore
from rsilab.web._diff import MAX_TEXT_BYTES, tree_changes


def stored(artifacts: ArtifactStore, root: Path, files: dict[str, bytes]) -> str:
    root.mkdir()
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return artifacts.put_tree(root).sha256


def test_changed_added_removed_and_binary_files_are_told_apart(tmp_path: Path) -> None:
    artifacts = ArtifactStore(tmp_path / "lab")
    old = stored(
        artifacts,
        tmp_path / "a",
        {"train.py": b"lr = 0.1\nepochs = 3\n", "gone.txt": b"bye\n", "w.bin": b"\x00\xff"},
    )
    new = stored(
        artifacts,
        tmp_path / "b",
        {"train.py": b"lr = 0.05\nepochs = 3\n", "new/notes.md": b"hi\n", "w.bin": b"\xff\x00"},
    )
    changes = {c.path: c for c in tree_changes(artifacts, old, new).changes}
    assert {p: c.status for p, c in changes.items()} == {
        "gone.txt": "removed",
        "new/notes.md": "added",
        "train.py": "modified",
        "w.bin": "modified",
    }
    assert "-lr = 0.1\n+lr = 0.05\n" in changes["train.py"].diff
    assert changes["new/notes.md"].diff.startswith("--- /dev/null\n+++ b/new/notes.md")
    assert changes["w.bin"].diff == "" and "binary or large" in changes["w.bin"].note
    assert tree_changes(artifacts, new, new).changes == []
    assert [c.status for c in tree_changes(artifacts, None, old).changes] == ["added"] * 3


def test_large_files_are_named_not_diffed(tmp_path: Path) -> None:
    artifacts = ArtifactStore(tmp_path / "lab")
    old = stored(artifacts, tmp_path / "a", {"big.txt": b"a\n" * MAX_TEXT_BYTES})
    new = stored(artifacts, tmp_path / "b", {"big.txt": b"b\n" * MAX_TEXT_BYTES})
    (change,) = tree_changes(artifacts, old, new).changes
    assert change.diff == "" and "bytes" in change.note


def test_a_collected_tree_raises_not_found(tmp_path: Path) -> None:
    artifacts = ArtifactStore(tmp_path / "lab")
    with pytest.raises(NotFoundError):
        tree_changes(artifacts, "0" * 64, None)


def test_caches_and_bytecode_are_left_out(tmp_path: Path) -> None:
    artifacts = ArtifactStore(tmp_path / "lab")
    old = stored(artifacts, tmp_path / "a", {"train.py": b"x = 1\n"})
    # an older snapshot, taken without leaving caches out, holds them
    new = stored(
        artifacts,
        tmp_path / "b",
        {
            "train.py": b"x = 2\n",
            "__pycache__/train.cpython-311.pyc": b"\x00bytecode",
            "lib/helper.pyc": b"\x00bytecode",
            ".pytest_cache/v/cache/lastfailed": b"{}",
        },
    )
    found = tree_changes(artifacts, old, new)
    assert [c.path for c in found.changes] == ["train.py"]
    assert found.ignored == 3


def test_a_config_only_reformatted_is_not_modified(tmp_path: Path) -> None:
    artifacts = ArtifactStore(tmp_path / "lab")
    old = stored(
        artifacts,
        tmp_path / "a",
        {
            "config.json": b'{"lr": 0.1, "width": 16}',
            "train.toml": b"lr = 0.1\nwidth = 16\n",
            "changed.json": b'{"lr": 0.1}',
            "notes.txt": b"a b\n",
        },
    )
    new = stored(
        artifacts,
        tmp_path / "b",
        {
            "config.json": b'{\n  "width": 16,\n  "lr": 0.1\n}\n',
            "train.toml": b"# tuned later\nwidth = 16\nlr   = 0.1\n",
            "changed.json": b'{\n  "lr": 0.2\n}\n',
            "notes.txt": b"a  b\n",
        },
    )
    found = tree_changes(artifacts, old, new)
    assert {c.path: c.status for c in found.changes} == {
        "changed.json": "modified",
        "notes.txt": "modified",  # only JSON and TOML are read for their meaning
    }
    assert found.reformatted == ("config.json", "train.toml")
