"""Temporary folders named by their owner process: only a dead owner's are removed."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from rsilab.sandbox.owners import (
    Owner,
    is_dead,
    owned_prefix,
    owner_of,
    remove_tree,
    sweep_dead_tmpdirs,
)


def _boot8() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")[:8]


def _dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _folder(root: Path, name: str) -> Path:
    folder = root / name
    (folder / "system" / "data-in").mkdir(parents=True)
    (folder / "system" / "data-in" / "train.jsonl").write_text("{}\n")
    return folder


def test_the_prefix_names_the_process_and_its_boot() -> None:
    prefix = owned_prefix("controller")
    assert prefix == f"rsilab-controller-{os.getpid()}@{_boot8()}-"
    made = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        assert owner_of(made.name) == Owner(os.getpid(), _boot8())
    finally:
        made.rmdir()


@pytest.mark.parametrize("name", ["rsilab-controller-abc123", "rsilab-sandbox-", "other-1@x-y"])
def test_names_of_another_form_name_no_owner(name: str) -> None:
    assert owner_of(name) is None


def test_a_dead_owners_folder_goes_and_a_live_ones_stays(tmp_path: Path) -> None:
    dead, boot = _dead_pid(), _boot8()
    gone = _folder(tmp_path, f"rsilab-controller-{dead}@{boot}-k3j2h1")
    rebooted = _folder(tmp_path, f"rsilab-sandbox-{os.getpid()}@00000000-a1b2c3")
    mine = _folder(tmp_path, f"rsilab-controller-{os.getpid()}@{boot}-z9y8x7")
    init = _folder(tmp_path, f"rsilab-sandbox-1@{boot}-q1w2e3")  # pid 1 is alive
    untagged = _folder(tmp_path, "rsilab-controller-oldstyle")
    assert set(sweep_dead_tmpdirs(tmp_path)) == {gone, rebooted}
    assert not gone.exists() and not rebooted.exists()
    assert mine.is_dir() and init.is_dir() and untagged.is_dir()


def test_a_planted_link_is_not_followed(tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep.txt").write_text("mine")
    scanned = tmp_path / "tmp"
    scanned.mkdir()
    (scanned / f"rsilab-controller-{_dead_pid()}@{_boot8()}-aaaaaa").symlink_to(precious)
    assert sweep_dead_tmpdirs(scanned) == []
    assert (precious / "keep.txt").read_text() == "mine"


def test_read_only_folders_a_job_left_are_removed(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "leftover")
    (folder / "system" / "data-in").chmod(0o500)
    folder.chmod(0o500)
    assert remove_tree(folder)
    assert not folder.exists()


def test_liveness() -> None:
    boot = _boot8()
    assert not is_dead(Owner(os.getpid(), boot))
    assert not is_dead(Owner(1, ""))  # boot unknown: the pid decides
    assert is_dead(Owner(_dead_pid(), boot))
    assert is_dead(Owner(os.getpid(), "00000000"))  # another boot: nothing of it survives
