"""``rsilab log --follow`` in a real process: new events appear, Ctrl-C exits 0."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pytest

from rsilab.records import EventDraft
from rsilab.store import Lab

DEADLINE_S = 20.0


def _pump(stream: IO[str], lines: queue.Queue[str]) -> None:
    for line in stream:
        lines.put(line)


def _wait_for(lines: queue.Queue[str], seen: list[str], text: str) -> bool:
    """Collect output until ``text`` shows up or the deadline passes."""
    deadline = time.monotonic() + DEADLINE_S
    while text not in "".join(seen):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        try:
            seen.append(lines.get(timeout=min(remaining, 0.2)))
        except queue.Empty:
            continue
    return True


@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT")
def test_follow_prints_new_events_and_stops_on_ctrl_c(lab: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rsilab", "log", "--follow", "--lab", str(lab)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True)
    reader.start()
    seen: list[str] = []
    try:
        assert _wait_for(lines, seen, "lab_created"), "".join(seen)
        with Lab.open(lab) as opened:
            opened.store.commit(
                EventDraft(actor="follow-test", role="human", action="note", detail="hello")
            )
        assert _wait_for(lines, seen, "follow-test"), "".join(seen)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=DEADLINE_S) == 0, "".join(seen)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=DEADLINE_S)
        proc.stdout.close()
    assert "Traceback" not in "".join(seen)
