"""StoppedWatch on real processes, with the scan clock given by the test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from rsilab.sandbox._stopped import StoppedWatch
from tests.sandbox.helpers import wait_until


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    # asleep in time.sleep, past Python's start-up (state R while it loads)
    assert wait_until(lambda: _state(proc.pid) == "S")
    yield proc
    proc.kill()
    proc.wait()


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as handle:
        text = handle.read()
    return text[text.rfind(")") + 2]


def _stop(pid: int) -> None:
    os.kill(pid, signal.SIGSTOP)
    assert wait_until(lambda: _state(pid) == "T")


def test_one_stop_is_continued_once_it_has_lasted_the_grace(
    sleeper: subprocess.Popen[bytes],
) -> None:
    watch = StoppedWatch(lambda: [sleeper.pid], grace_s=2.0)
    _stop(sleeper.pid)
    watch.check(100.0)
    watch.check(101.9)  # 1.9 s into the stop: left alone
    assert _state(sleeper.pid) == "T" and watch.continued == 0 and watch.note() is None
    watch.check(102.5)
    assert wait_until(lambda: _state(sleeper.pid) == "S")
    assert watch.continued == 1
    assert (watch.note() or "").startswith("1 stop(s) of the job's processes lasted 2 s")


def test_a_new_stop_after_a_continue_starts_its_own_clock(
    sleeper: subprocess.Popen[bytes],
) -> None:
    watch = StoppedWatch(lambda: [sleeper.pid], grace_s=2.0)
    _stop(sleeper.pid)
    watch.check(100.0)
    os.kill(sleeper.pid, signal.SIGCONT)  # the job ends its own stop between two scans...
    assert wait_until(lambda: _state(sleeper.pid) == "S")
    _stop(sleeper.pid)  # ...and stops again: seen stopped on both scans, but two stops
    watch.check(101.0)
    watch.check(102.5)  # 2.5 s since the first sighting, 1.5 s into this stop
    assert _state(sleeper.pid) == "T" and watch.continued == 0
    watch.check(103.0)
    assert wait_until(lambda: _state(sleeper.pid) == "S") and watch.continued == 1


def test_running_and_vanished_processes_are_left_alone(
    sleeper: subprocess.Popen[bytes],
) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    watch = StoppedWatch(lambda: [sleeper.pid, gone.pid], grace_s=0.0)
    watch.check(100.0)
    watch.check(200.0)
    assert watch.continued == 0 and _state(sleeper.pid) == "S"
