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
    changes = {c.path: c for c in tree_changes(artifacts, old, new)}
    assert {p: c.status for p, c in changes.items()} == {
        "gone.txt": "removed",
        "new/notes.md": "added",
        "train.py": "modified",
        "w.bin": "modified",
    }
    assert "-lr = 0.1\n+lr = 0.05\n" in changes["train.py"].diff
    assert changes["new/notes.md"].diff.startswith("--- /dev/null\n+++ b/new/notes.md")
    assert changes["w.bin"].diff == "" and "binary or large" in changes["w.bin"].note
    assert tree_changes(artifacts, new, new) == []
    assert [c.status for c in tree_changes(artifacts, None, old)] == ["added"] * 3


def test_large_files_are_named_not_diffed(tmp_path: Path) -> None:
    artifacts = ArtifactStore(tmp_path / "lab")
    old = stored(artifacts, tmp_path / "a", {"big.txt": b"a\n" * MAX_TEXT_BYTES})
    new = stored(artifacts, tmp_path / "b", {"big.txt": b"b\n" * MAX_TEXT_BYTES})
    (change,) = tree_changes(artifacts, old, new)
    assert change.diff == "" and "bytes" in change.note


def test_a_collected_tree_raises_not_found(tmp_path: Path) -> None:
    artifacts = ArtifactStore(tmp_path / "lab")
    with pytest.raises(NotFoundError):
        tree_changes(artifacts, "0" * 64, None)
