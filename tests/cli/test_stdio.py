"""rsilab started with a standard stream closed (``<&-``, ``>&-``, ``2>&-``: cron, some
service managers) works as with that stream on /dev/null: its jobs start in the sandbox, and
what it prints goes nowhere instead of failing. Started from a folder that was deleted, it
says so in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

_CLOSE = {"stdin": "<&-", "stdout": ">&-", "stderr": "2>&-"}


def _with_closed(stream: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``rsilab ARGS`` started by a shell with ``stream`` closed; the others are captured
    (a closed one reads back empty)."""
    script = f'exec "$@" {_CLOSE[stream]}'
    return subprocess.run(
        ["/bin/sh", "-c", script, "sh", sys.executable, "-m", "rsilab", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.usefixtures("needs_bwrap")
def test_jobs_start_in_the_sandbox_with_stdin_closed() -> None:
    ran = _with_closed("stdin", "doctor", "--json")
    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout)
    assert (report["sandbox"], report["security_boundary"]) == ("bwrap", True), report["why"]


def test_output_into_a_closed_stdout_is_discarded() -> None:
    ran = _with_closed("stdout", "task", "list")
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", "")


def test_a_closed_stderr_leaves_stdout_as_it_was() -> None:
    ran = _with_closed("stderr", "task", "list")
    assert ran.returncode == 0
    assert "synthetic" in ran.stdout


def test_a_current_folder_that_was_deleted_is_one_line(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    command = f"cd {gone} && rmdir {gone} && exec {sys.executable} -m rsilab task list"
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=False)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith("error: the current folder no longer exists"), lines
    assert "Traceback" not in done.stderr
