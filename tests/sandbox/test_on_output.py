"""``RunSpec.on_output``: a job's output reaches the caller while the job still runs."""

from __future__ import annotations

from pathlib import Path

from rsilab.sandbox import Limits, Sandbox
from tests.sandbox.helpers import QUICK, py

# The job goes on only once the host has seen its first line (and answered with a file):
# so the callback must get output before the job ends -- no timing involved.
_WAITS_FOR_HOST = """
import os, sys, time
print("ready", flush=True)
deadline = time.monotonic() + 20
while not os.path.exists("go"):
    if time.monotonic() > deadline:
        sys.exit(7)
    time.sleep(0.01)
print("after", flush=True)
print("to stderr", file=sys.stderr, flush=True)
"""


def test_output_is_streamed_while_the_job_runs(sandbox: Sandbox, workspace: Path) -> None:
    seen: list[tuple[int, bytes]] = []

    def on_output(fd: int, chunk: bytes) -> None:
        seen.append((fd, chunk))
        if b"ready" in chunk:
            (workspace / "go").touch()

    result = sandbox.run(py(workspace, _WAITS_FOR_HOST, on_output=on_output))
    assert result.ok, result
    assert b"".join(c for fd, c in seen if fd == 1) == result.stdout == b"ready\nafter\n"
    assert b"".join(c for fd, c in seen if fd == 2) == result.stderr == b"to stderr\n"


def test_output_over_the_limit_is_not_passed_on(sandbox: Sandbox, workspace: Path) -> None:
    seen: list[bytes] = []
    limits = Limits(**{**QUICK.__dict__, "output_bytes": 1000})
    code = "import sys; sys.stdout.write('x' * 5000); sys.stdout.flush()"
    result = sandbox.run(
        py(workspace, code, limits=limits, on_output=lambda _fd, chunk: seen.append(chunk))
    )
    assert result.stdout_truncated
    assert b"".join(seen) == result.stdout == b"x" * 1000
