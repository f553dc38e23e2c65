"""rsilab.faults: a named point kills its process with SIGKILL on the hit asked for, and only
there; unset, it does nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from rsilab.faults import parse

SCRIPT = """
import sys
from rsilab.faults import fault_point
for i in range(1, 4):
    fault_point("other")
    fault_point("here")
    print(i, flush=True)
"""


def _run(fault: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "RSILAB_FAULT"}
    if fault is not None:
        env["RSILAB_FAULT"] = fault
    return subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=60
    )


def test_the_nth_hit_of_the_named_point_kills_the_process_at_once() -> None:
    done = _run("here:2")
    assert done.returncode == -signal.SIGKILL
    assert done.stdout.split() == ["1"]  # killed before the second print
    assert done.stderr.strip() == "rsilab fault point here:2: SIGKILL"


def test_the_first_hit_is_the_default() -> None:
    done = _run("here")
    assert done.returncode == -signal.SIGKILL and done.stdout == ""


@pytest.mark.parametrize("fault", [None, "", "elsewhere", "here:4"])
def test_a_point_not_named_or_not_reached_does_nothing(fault: str | None) -> None:
    done = _run(fault)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "2", "3"]


def test_the_variable_is_parsed_strictly() -> None:
    assert parse("") is None and parse("  ") is None
    assert parse("commit") == ("commit", 1)
    assert parse("controller_predict:3") == ("controller_predict", 3)
    for bad in ("commit:0", "commit:x", ":2"):
        with pytest.raises(ValueError):
            parse(bad)
