"""Held harnesses and an operator: real controller jobs stopped by real signals from outside.

A *held* copy of a harness runs each entry point through ``hold_<token>.py``, which blocks
SIGUSR1 and waits for it before running the real script: the job is parked until the test
decides. :class:`Operator` plays the host: it finds each parked job by the token in its command
line (and by SIGUSR1 in its blocked mask, so it is known to be waiting), then sends the signal
its plan names for that step (SIGKILL, SIGTERM, ...) or SIGUSR1 to let it run. No sleeps
decide anything: a job runs only once the operator has seen it and acted.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_HOLD = """\
import runpy, signal, sys, time
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
while signal.SIGUSR1 not in signal.sigpending():  # not sigwait: it unblocks while it waits
    time.sleep(0.005)
script = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path.insert(0, ".")
runpy.run_path(script, run_name="__main__")
"""
_SIGUSR1_BIT = 1 << (signal.SIGUSR1 - 1)


def hold(harness: Path) -> str:
    """Make every entry point of ``harness`` (in place) wait for the operator; its token."""
    token = secrets.token_hex(6)
    (harness / f"hold_{token}.py").write_text(_HOLD)
    manifest = harness / "harness.toml"
    text = manifest.read_text()
    for step in ("train", "predict"):
        text = re.sub(
            rf'^{step} = "python (\S+)"',
            rf'{step} = "python hold_{token}.py \1"',
            text,
            flags=re.MULTILINE,
        )
    manifest.write_text(text)
    return token


class Operator:
    """Acts on each parked job of ``token``. A step (``train.py`` or ``predict.py``) with a
    plan has a victim: the seed of its first parked job. The n-th parked job of that step and
    seed gets ``plan[step][n]`` when there is one; every other job gets SIGUSR1 (run)."""

    def __init__(
        self, token: str, plan: dict[str, list[int]], *, release: int | None = None
    ) -> None:
        self.token = token
        self.release = release
        """How many jobs to let run (None: all); the rest stay parked."""
        self.plan = {step: list(signals) for step, signals in plan.items()}
        self.acted: list[tuple[str, int]] = []
        """(step, signal) in the order sent."""
        self.victims: dict[str, str] = {}
        """step -> the seed (as its command line gives it) the plan acts on."""
        self._seen: set[tuple[int, str]] = set()
        self._stop = threading.Event()

    def _parked(self) -> Iterator[tuple[int, list[str]]]:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                status = (entry / "status").read_text()
                # a pid and its start time name one process: pids are reused (32,768 here)
                started = (entry / "stat").read_text().rsplit(")", 1)[1].split()[19]
            except (OSError, IndexError):
                continue
            if (int(entry.name), started) in self._seen:
                continue
            if len(argv) < 3 or not argv[1].endswith(f"hold_{self.token}.py".encode()):
                continue
            blocked = re.search(r"^SigBlk:\s*([0-9a-f]+)", status, re.MULTILINE)
            if blocked and int(blocked.group(1), 16) & _SIGUSR1_BIT:
                yield (int(entry.name), started), [a.decode() for a in argv[2:]]

    def _act(self) -> None:
        while not self._stop.wait(0.005):
            for (pid, started), argv in self._parked():
                released = sum(1 for _, sig in self.acted if sig == signal.SIGUSR1)
                if self.release is not None and released >= self.release:
                    break
                self._seen.add((pid, started))
                step, seed = argv[0], argv[argv.index("--seed") + 1]
                planned = self.plan.get(step, [])
                victim = self.victims.setdefault(step, seed) if planned else None
                sig = planned.pop(0) if planned and seed == victim else signal.SIGUSR1
                self.acted.append((step, sig))
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    continue

    @contextmanager
    def running(self) -> Iterator[Operator]:
        """Act on parked jobs in a thread for as long as the block runs."""
        thread = threading.Thread(target=self._act, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join()
