"""What crosses between the head and a Ray node: the tars, and how the head applies them.

The archives that come back were written by untrusted job code, so these tests build hostile
ones by hand and check that nothing lands outside the workspace.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from rsilab.executors._ray_bundle import (
    DELETED,
    apply_deletions,
    deleted_paths,
    pack_changes,
    pack_inputs,
    safe_unpack,
    snapshot,
)


def _tar(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for info, data in members:
            info.size = len(data) if info.isfile() else 0
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return buffer.getvalue()


def _file(name: str) -> tarfile.TarInfo:
    return tarfile.TarInfo(name)


def _link(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, target
    return info


def test_inputs_round_trip_and_leave_out_hidden_paths(tmp_path: Path) -> None:
    workspace, data = tmp_path / "ws", tmp_path / "data"
    (workspace / "sub").mkdir(parents=True)
    (workspace / "sub" / "a.txt").write_text("a")
    (workspace / "secret").write_text("s")
    data.mkdir()
    (data / "d.txt").write_text("d")
    bundle = pack_inputs(workspace, [data], hidden=[workspace / "secret"])
    out = tmp_path / "node"
    safe_unpack(bundle, out / "ws", "workspace")
    safe_unpack(bundle, out / "mounts", "mounts")
    assert (out / "ws" / "sub" / "a.txt").read_text() == "a"
    assert not (out / "ws" / "secret").exists()
    assert (out / "mounts" / "0" / "d.txt").read_text() == "d"


def test_changes_hold_what_changed_and_what_was_removed(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "same.txt").write_text("same")
    (root / "edit.txt").write_text("old")
    (root / "gone.txt").write_text("bye")
    before = snapshot(root)
    (root / "edit.txt").write_text("new")
    (root / "gone.txt").unlink()
    (root / "new.txt").write_text("fresh")
    bundle = pack_changes(root, before)
    with tarfile.open(fileobj=io.BytesIO(bundle)) as tar:
        names = sorted(tar.getnames())
    assert names == sorted([DELETED, "workspace/edit.txt", "workspace/new.txt"])
    assert deleted_paths(bundle) == ["gone.txt"]


def test_unpacking_refuses_paths_and_links_that_leave_the_workspace(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    workspace = tmp_path / "ws"
    bundle = _tar(
        (_file("workspace/../outside/escaped.txt"), b"x"),
        (_file("workspace//abs.txt"), b"ok"),
        (_link("workspace/up", "../outside"), b""),
        (_file("workspace/up/through.txt"), b"x"),
        (_link("workspace/etc", "/etc"), b""),
        (_file("workspace/fine.txt"), b"fine"),
    )
    written, notes = safe_unpack(bundle, workspace, "workspace")
    assert os.listdir(outside) == []
    assert (workspace / "fine.txt").read_text() == "fine"
    assert not (workspace / "etc").is_symlink()
    assert "fine.txt" in written
    assert len(notes) >= 3, notes


def test_deletions_never_follow_a_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "link").symlink_to(outside)
    (workspace / "mine.txt").write_text("mine")
    apply_deletions(
        workspace, ["link/keep.txt", "../outside/keep.txt", "/etc/hostname", "mine.txt"]
    )
    assert (outside / "keep.txt").read_text() == "keep"
    assert not (workspace / "mine.txt").exists()
    assert (workspace / "link").is_symlink()


def test_a_deleted_listing_must_be_a_list_of_paths(tmp_path: Path) -> None:
    listing = json.dumps({"not": "a list"}).encode()
    bundle = _tar((_file(DELETED), listing))
    with pytest.raises(ValueError, match="not a list of paths"):
        deleted_paths(bundle)
