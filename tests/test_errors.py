"""write_refused: a disk's refusal (full, over quota, read-only) is found wherever it sits in
an error's chain; any other error is not one."""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

from rsilab.errors import UserError, WriteRefused, write_refused


def _raised(make: Callable[[], None]) -> BaseException:
    try:
        make()
    except Exception as exc:
        return exc
    raise AssertionError("nothing raised")


def test_a_quota_error_under_two_others_is_found_with_its_file(tmp_path: Path) -> None:
    def nested() -> None:
        try:
            raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT), str(tmp_path / "x.bin"))
        except OSError:  # `from None` hides it from a traceback, not from the cause
            raise RuntimeError("saving the checkpoint failed") from None

    def outer() -> None:
        try:
            nested()
        except RuntimeError as exc:
            raise UserError("the campaign stopped") from exc

    found = write_refused(_raised(outer))
    assert isinstance(found, WriteRefused)
    assert found.message.startswith(f"cannot write {tmp_path}/x.bin: the disk quota is spent")
    assert found.hint.startswith("free space on /") and "raise the disk quota" in found.hint
    assert found.code == errno.EDQUOT


def test_a_copy_of_many_files_names_the_target_that_did_not_fit(tmp_path: Path) -> None:
    error = shutil.Error([("a/x", str(tmp_path / "b/x"), "[Errno 28] No space left on device")])
    found = write_refused(error)
    assert found is not None and found.path == str(tmp_path / "b/x")


def test_a_tool_that_said_read_only_file_system_is_a_refusal_without_a_path() -> None:
    found = write_refused(RuntimeError("cp: cannot create '/x/y': Read-only file system"))
    assert found is not None and found.path is None and found.code == errno.EROFS
    assert found.message.startswith("a write was refused: the filesystem is read-only (cp:")
    assert found.hint.startswith("make the filesystem writable again, then")


def test_sqlite_full_is_a_refusal_and_then_names_the_next_step() -> None:
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorname = "SQLITE_FULL"  # type: ignore[attr-defined]
    found = write_refused(full)
    assert found is not None
    later = found.then("`rsilab resume cmp-1` continues the campaign")
    assert later.hint == "free space, then `rsilab resume cmp-1` continues the campaign"
    assert later.message == found.message


def test_other_errors_are_no_refusal() -> None:
    assert write_refused(PermissionError(errno.EACCES, "Permission denied", "/x")) is None
    assert write_refused(OSError(errno.EIO, "Input/output error")) is None
    assert write_refused(ValueError("no space here")) is None
    assert write_refused(UserError("bad --budget")) is None
