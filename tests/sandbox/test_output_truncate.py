"""``Limits.truncate_output``: past the cap a stream is dropped and counted; the job goes on."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rsilab.sandbox import KillReason, Sandbox
from tests.sandbox.helpers import QUICK, py

# 5,000 bytes on stdout, 300 on stderr, in several writes; then a line on stderr and a file
# written after the cap, which show the job was not stopped.
_LOUD = """
import os, sys
for _ in range(5):
    os.write(1, b"x" * 1000)
os.write(2, b"e" * 300)
open("after.txt", "w").write("done")
sys.exit(4)
"""


def test_output_past_the_cap_is_dropped_and_counted(sandbox: Sandbox, workspace: Path) -> None:
    seen: list[tuple[int, bytes]] = []
    limits = dataclasses.replace(QUICK, output_bytes=1200, truncate_output=True)
    result = sandbox.run(
        py(workspace, _LOUD, limits=limits, on_output=lambda fd, chunk: seen.append((fd, chunk)))
    )
    assert result.killed is None and result.exit_code == 4, result
    assert (workspace / "after.txt").read_text() == "done"
    assert result.stdout == b"x" * 1200 and result.stdout_truncated
    assert result.stdout_dropped == 5000 - 1200
    assert result.stderr == b"e" * 300 and not result.stderr_truncated
    assert result.stderr_dropped == 0
    assert b"".join(c for fd, c in seen if fd == 1) == b"x" * 1200  # nothing past the cap


def test_without_it_output_past_the_cap_still_kills(sandbox: Sandbox, workspace: Path) -> None:
    limits = dataclasses.replace(QUICK, output_bytes=1200)
    result = sandbox.run(py(workspace, _LOUD, limits=limits))
    assert result.killed is KillReason.OUTPUT and result.stdout_truncated
    assert result.stdout == b"x" * 1200
