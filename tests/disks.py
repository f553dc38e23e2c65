"""Small real filesystems for tests of a disk that refuses writes: a tmpfs of a few MiB
(mounting needs root: elsewhere the tests that use one are skipped), filled to the byte."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")


@contextlib.contextmanager
def small_tmpfs(where: Path, size_mb: int = 20, *, read_only: bool = False) -> Iterator[Path]:
    """A tmpfs of ``size_mb`` MiB mounted at ``where`` (made), unmounted on leaving."""
    where.mkdir(parents=True, exist_ok=True)
    options = f"size={size_mb}m" + (",ro" if read_only else "")
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(mount: Path, leave_kib: int = 0) -> Path:
    """Fill ``mount`` until writes fail, then give back ``leave_kib`` KiB: the file that holds
    the space (remove it to free the disk)."""
    filler = mount / "filler"
    with open(filler, "wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 65536)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    with open(filler, "rb+") as out:
        size = out.seek(0, os.SEEK_END)
        out.truncate(max(0, size - leave_kib * 1024))
    return filler
