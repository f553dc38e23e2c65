"""Lending a workspace never touches what lies outside it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rsilab.sandbox._ownership import lend, restore

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")


def test_links_and_hard_links_are_not_lent(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("host file")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "own.txt").write_text("job file")
    (workspace / "link").symlink_to(outside)
    os.link(outside, workspace / "hard")

    lend(workspace, 65534, 65534)
    assert (workspace / "own.txt").stat().st_uid == 65534
    assert workspace.stat().st_uid == 65534
    assert outside.stat().st_uid == 0, "neither the symlink nor the hard link was followed"

    restore(workspace, 65534)
    assert {p.lstat().st_uid for p in [workspace, *workspace.iterdir()]} == {0}


def test_a_folder_lent_twice_returns_to_its_owner_after_the_last_loan(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    lend(shared, 65534, 65534)
    lend(shared, 65534, 65534)  # a second job while the first still holds it
    (shared / "made-by-job").touch()
    os.chown(shared / "made-by-job", 65534, 65534)
    restore(shared, 65534)
    assert shared.stat().st_uid == 65534, "the other job still writes there"
    restore(shared, 65534)
    assert {p.stat().st_uid for p in [shared, *shared.iterdir()]} == {0}


def test_a_second_loan_lends_what_the_owner_made_since_the_first(tmp_path: Path) -> None:
    """An ``rsilab agent`` workspace is lent for the agent's whole run; the host then makes a
    job's ``runs/<job-id>/`` folder in it, and the job, a second loan, must be able to write
    there."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    lend(workspace, 65534, 65534)
    (workspace / "runs" / "job-1").mkdir(parents=True)  # made by the host (root) meanwhile
    lend(workspace, 65534, 65534)
    assert (workspace / "runs" / "job-1").stat().st_uid == 65534
    restore(workspace, 65534)
    restore(workspace, 65534)
    assert {p.lstat().st_uid for p in workspace.rglob("*")} | {workspace.stat().st_uid} == {0}
