"""A reader that stops early (``rsilab ... | head -1``) ends rsilab quietly with status 141,
as a Unix tool killed by SIGPIPE ends, never with an "internal error"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.helpers import explain, rsilab


def _into_closed_pipe(*args: str | Path) -> tuple[int, str]:
    """Run the console entry with stdout a pipe nobody reads any more."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        ran = subprocess.run(
            [sys.executable, "-m", "rsilab", *map(str, args)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)
    return ran.returncode, ran.stderr


@pytest.mark.parametrize("args", [["--help"], ["mcp", "--help"], ["versions", "--help"]])
def test_help_into_a_closed_pipe_ends_quietly(args: list[str]) -> None:
    assert _into_closed_pipe(*args) == (141, "")


def test_command_output_into_a_closed_pipe_ends_quietly(lab: Path, campaign_id: str) -> None:
    shown = rsilab("show", campaign_id, "--lab", lab)
    assert shown.exit_code == 0, explain(shown)
    assert _into_closed_pipe("show", campaign_id, "--lab", lab) == (141, "")
    assert _into_closed_pipe("task", "list") == (141, "")
