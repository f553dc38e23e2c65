"""Hostile trees a job can leave in its workspace: folders nested far deeper than Python's
recursion limit, FIFOs, sockets and link loops. The host must clear, walk and release them
without recursion, without opening anything but folders, and without following a link, so
one actor's workspace never takes the lab down."""

from __future__ import annotations

import os
import socket
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rsilab.sandbox import Confinement, _images, hand_over, remove_tree
from rsilab.sandbox._identity import ephemeral_user
from rsilab.sandbox._places import strip_setid
from rsilab.sandbox._trees import visit
from rsilab.sandbox._workspaces import WorkspaceFs
from rsilab.sandbox.owners import remove_tree as remove_dead_tree

IMAGES = pytest.mark.skipif(
    not _images.support().enforced, reason=f"no workspace images here: {_images.support().reason}"
)
DEEP = sys.getrecursionlimit() + 100
"""Deeper than any recursive walk (shutil.rmtree, os.walk in Python 3.11) can go."""


def nest(folder: Path, levels: int = DEEP) -> None:
    """What the attacking job ran: ``os.makedirs('x'); os.chdir('x')`` in a loop (relative
    steps, so no path is ever longer than one name), with a file at the bottom."""
    here = os.getcwd()
    os.chdir(folder)
    try:
        for _ in range(levels):
            os.makedirs("x", exist_ok=True)
            os.chdir("x")
        Path("bottom.txt").write_text("deep")
    finally:
        os.chdir(here)


def hostile(folder: Path) -> None:
    """A FIFO, a unix socket, a link loop and a link out, next to a deep tree."""
    nest(folder)
    os.mkfifo(folder / "fifo.txt")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(folder / "sock"))
    (folder / "loop").symlink_to("loop")
    (folder / "out").symlink_to("/etc")


@pytest.fixture(autouse=True)
def _leave_no_deep_tree(tmp_path: Path) -> Iterator[None]:
    """pytest deletes old temporary folders with shutil.rmtree, which recurses per level."""
    yield
    remove_tree(tmp_path, keep_top=True)


def test_a_tree_deeper_than_the_recursion_limit_is_removed(tmp_path: Path) -> None:
    top = tmp_path / "top"
    top.mkdir()
    hostile(top)
    os.chmod(top / "x", 0o500)  # a folder the job made read-only is emptied all the same
    remove_tree(top, keep_top=True)
    assert top.is_dir() and list(top.iterdir()) == []
    remove_tree(top)
    assert not top.exists()
    remove_tree(top)  # gone already: nothing to do


def test_a_link_is_removed_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    (tmp_path / "link").symlink_to(outside)
    remove_tree(tmp_path / "link")
    assert (outside / "keep.txt").read_text() == "mine" and not (tmp_path / "link").exists()
    with pytest.raises(NotADirectoryError):
        remove_tree(outside / "keep.txt", keep_top=True)


def test_visit_walks_any_depth_and_opens_no_fifo(tmp_path: Path) -> None:
    hostile(tmp_path)
    seen = {name: info.st_mode for _, name, info in visit(tmp_path)}
    assert sum(1 for _ in visit(tmp_path)) == DEEP + 5  # x levels, bottom, fifo, sock, 2 links
    assert stat.S_ISFIFO(seen["fifo.txt"]) and stat.S_ISSOCK(seen["sock"])
    assert stat.S_ISLNK(seen["loop"]) and stat.S_ISREG(seen["bottom.txt"])


def test_owner_and_setid_fixes_reach_every_level(tmp_path: Path) -> None:
    hostile(tmp_path)
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        for _ in range(DEEP):
            fd, old = os.open("x", os.O_RDONLY, dir_fd=fd), fd
            os.close(old)
        os.chmod("bottom.txt", 0o4755, dir_fd=fd)
        strip_setid(tmp_path)
        assert stat.S_IMODE(os.stat("bottom.txt", dir_fd=fd).st_mode) == 0o755
    finally:
        os.close(fd)
    hand_over(tmp_path)  # walks it all (a no-op owner change here), neither recursing nor blocking


def test_a_dead_processes_deep_tree_is_removed(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    hostile(tmp_path / "t")
    assert remove_dead_tree(tmp_path / "t") and not (tmp_path / "t").exists()


@pytest.fixture
def fs(tmp_path: Path) -> Iterator[WorkspaceFs]:
    confinement = Confinement(ephemeral_user(), state=tmp_path / "state", workspace_mb=32)
    made = WorkspaceFs(confinement, tmp_path / "state")
    yield made
    made.release_held()
    for point, _ in _images.mounts():
        if point.is_relative_to(tmp_path):
            _images.unmount(point)


@IMAGES
def test_a_deep_hostile_workspace_is_released_and_the_lab_goes_on(
    fs: WorkspaceFs, tmp_path: Path
) -> None:
    """The reported fault: releasing (copying the image back: clear, cp, strip_setid) a
    workspace a job nested 1100 deep raised RecursionError, left it in phase 'unpacking',
    and every later sandbox's release_orphans failed with it."""
    folder = fs.ensure(tmp_path / "attacker")
    hostile(folder)
    fs.release(folder)  # unpacks into the plain folder
    assert _images.mounted_source(folder) is None
    assert (folder / "fifo.txt").is_fifo() and (folder / "x" / "x").is_dir()
    again = fs.ensure(folder)  # into an image again: clear() of the plain folder, any depth
    fs.release(again)
    assert not list((tmp_path / "state").glob("*.json")), "no record left half-way"
    other = fs.ensure(tmp_path / "other")  # another actor's workspace works
    (other / "ok.txt").write_text("fine")
    fs.release(other)
    assert (tmp_path / "other" / "ok.txt").read_text() == "fine"
    remove_tree(folder, keep_top=True)  # and the faulty one can be cleared and made again
    fs.release(fs.ensure(folder))
