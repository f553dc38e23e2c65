"""Continuing a job's processes that were left stopped.

A job has no terminal and no shell doing job control, so nothing outside it ever sends
SIGCONT: a process of the job stopped by SIGSTOP (by itself, or by another process of the
same user inside the job) stays stopped until the wall-time limit. Two processes that stop
each other at the same moment deadlock the job that way - a judge pausing the code it times
while that code stops the judge (the kernel task's driver) - and the experiment is lost to a
hang instead of being judged.

So the supervisor looks at the job's processes every ``SCAN_S`` and sends SIGCONT to any found
stopped (state ``T``) in one stop that lasted ``grace_s``, and the result says so. A
program that stops processes on purpose, briefly, is untouched; one that relies on a stop
lasting longer than the grace cannot run in a sandbox. Trace stops (state ``t``, a debugger
in the job) are left alone. A program that must notice being stopped (the kernel's driver and
its reference worker) counts the SIGCONT it receives: the supervisor's continuation is
evidence of the stop, never a way to hide it.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterable

STOPPED_GRACE_S = 3.0
"""How long a process may stay stopped before the supervisor continues it."""
SCAN_S = 0.5
"""How often the job's processes are looked at for stops."""


def _stop_mark(pid: int) -> int | None:
    """While ``pid`` is stopped by a signal (state T), its context switches so far; None
    when it runs or is gone. A stopped process is never scheduled, so the mark stays the
    same for as long as one stop lasts and changes when it is continued and stopped again."""
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            lines = handle.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in lines if ":" in line)
    if not fields.get("State", "").strip().startswith("T"):
        return None
    try:
        return sum(int(fields[f"{kind}_ctxt_switches"]) for kind in ("voluntary", "nonvoluntary"))
    except (KeyError, ValueError):
        return None


class StoppedWatch:
    """Finds the job's processes left stopped and continues them; see the module doc.

    ``pids`` lists the job's processes (host pids) on each call.
    """

    def __init__(self, pids: Callable[[], Iterable[int]], grace_s: float = STOPPED_GRACE_S) -> None:
        self.pids = pids
        self.grace_s = grace_s
        self.since: dict[tuple[int, int], float] = {}
        """(pid, stop mark) -> when that stop was first seen."""
        self.continued = 0
        self._next = 0.0

    def check(self, now: float) -> None:
        """Scan if one is due: note new stops, continue those that lasted ``grace_s``."""
        if now < self._next:
            return
        self._next = now + SCAN_S
        stops = {(pid, mark) for pid in self.pids() if (mark := _stop_mark(pid)) is not None}
        self.since = {stop: self.since.get(stop, now) for stop in stops}
        for (pid, mark), since in list(self.since.items()):
            if now - since >= self.grace_s:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGCONT)
                    self.continued += 1
                del self.since[(pid, mark)]

    def note(self) -> str | None:
        """What the result should say, if any process was continued."""
        if not self.continued:
            return None
        return (
            f"{self.continued} stop(s) of the job's processes lasted {self.grace_s:g} s and were "
            "ended by the supervisor (SIGCONT): nothing in a job would ever continue them"
        )
