"""The host reaches what a job wrote without following a link anywhere on the path."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from rsilab.sandbox.nofollow import UnsafePath, open_written, write_empty


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace with runs/a/model.bin, and a host folder outside it holding model.bin."""
    workspace, host = tmp_path / "ws", tmp_path / "host"
    (workspace / "runs" / "a").mkdir(parents=True)
    (workspace / "runs" / "a" / "model.bin").write_bytes(b"weights")
    host.mkdir()
    (host / "model.bin").write_bytes(b"host file")
    return workspace, host


def _read(workspace: Path, rel: str) -> bytes:
    fd = open_written(workspace, rel)
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def test_a_regular_file_is_read(tree: tuple[Path, Path]) -> None:
    workspace, _ = tree
    assert _read(workspace, "runs/a/model.bin") == b"weights"
    assert _read(workspace, "./runs/a/model.bin") == b"weights"


@pytest.mark.parametrize("where", ["runs", "runs/a"])
def test_a_folder_on_the_way_replaced_by_a_link_is_refused(
    tree: tuple[Path, Path], where: str
) -> None:
    workspace, host = tree
    planted = workspace / where
    planted.rename(planted.with_name(planted.name + ".moved"))
    if where == "runs":  # runs -> a host folder that holds a/model.bin
        (host / "a").mkdir()
        (host / "a" / "model.bin").write_bytes(b"host file")
        planted.symlink_to(host)
    else:  # runs/a -> the host folder that holds model.bin
        planted.symlink_to(host)
    with pytest.raises(UnsafePath, match="passes through a link"):
        _read(workspace, "runs/a/model.bin")
    with pytest.raises(UnsafePath, match="passes through a link"):
        write_empty(workspace, "runs/a/model.bin")
    for held in host.rglob("model.bin"):
        assert held.read_bytes() == b"host file"  # never read back, never written through


def test_a_link_at_the_end_is_not_read(tree: tuple[Path, Path]) -> None:
    workspace, host = tree
    model = workspace / "runs" / "a" / "model.bin"
    model.unlink()
    model.symlink_to(host / "model.bin")
    with pytest.raises(UnsafePath, match="is a link"):
        _read(workspace, "runs/a/model.bin")


def test_a_link_at_the_end_is_replaced_not_written_through(tree: tuple[Path, Path]) -> None:
    workspace, host = tree
    model = workspace / "runs" / "a" / "model.bin"
    model.unlink()
    model.symlink_to(host / "model.bin")
    write_empty(workspace, "runs/a/model.bin")
    assert not model.is_symlink() and model.read_bytes() == b""
    assert (host / "model.bin").read_bytes() == b"host file"


def test_a_fifo_is_refused_without_blocking(tree: tuple[Path, Path]) -> None:
    workspace, _ = tree
    os.mkfifo(workspace / "runs" / "a" / "pipe")
    done: list[BaseException] = []

    def read() -> None:
        try:
            _read(workspace, "runs/a/pipe")
        except BaseException as exc:  # handed to the test thread
            done.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert not reader.is_alive(), "opening a FIFO blocked"
    assert len(done) == 1 and isinstance(done[0], UnsafePath)


@pytest.mark.parametrize("rel", ["../host/model.bin", "/etc/passwd", ""])
def test_a_path_that_leaves_the_workspace_is_refused(tree: tuple[Path, Path], rel: str) -> None:
    workspace, _ = tree
    with pytest.raises(UnsafePath):
        _read(workspace, rel)


def test_a_missing_file_is_not_found(tree: tuple[Path, Path]) -> None:
    workspace, _ = tree
    with pytest.raises(FileNotFoundError):
        _read(workspace, "runs/b/model.bin")
