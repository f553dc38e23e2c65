"""Sampling a process tree through /proc, where no cgroup counts it for us.

Used by the process sandbox and by bwrap without cgroups: every ``interval_s`` the tree under
one root pid is walked through ``/proc/<pid>/task/<tid>/children`` and its CPU time (own plus
reaped children) and resident size are summed. Between samples a short-lived spike can be
missed, so figures are lower bounds.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat(pid: int) -> tuple[float, int] | None:
    """(CPU seconds incl. reaped children, resident bytes) of one process, None if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    if len(fields) < 22:
        return None
    ticks = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / _TICKS, int(fields[21]) * _PAGE


def _children(pid: int) -> list[int]:
    """Child pids of every thread of ``pid``."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            found += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
        except (OSError, ValueError):
            continue
    return found


def tree_pids(root: int) -> list[int]:
    """``root`` and every live process below it (host pids), in no set order."""
    found: list[int] = []
    todo, seen = [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        if os.path.exists(f"/proc/{pid}"):
            found.append(pid)
            todo += _children(pid)
    return found


class TreeSampler:
    """CPU seconds and peak resident size of the tree under ``root``, sampled."""

    def __init__(self, root: int, interval_s: float = 0.25) -> None:
        self.root = root
        self.interval_s = interval_s
        self.cpu_s = 0.0
        self.peak_mb = 0.0
        self._next = 0.0

    def sample(self, force: bool = False) -> None:
        """Take a sample if one is due (or ``force``)."""
        now = time.monotonic()
        if not force and now < self._next:
            return
        self._next = now + self.interval_s
        cpu, rss = 0.0, 0
        for pid in tree_pids(self.root):
            stat = _stat(pid)
            if stat is not None:
                cpu, rss = cpu + stat[0], rss + stat[1]
        self.cpu_s = max(self.cpu_s, cpu)
        self.peak_mb = max(self.peak_mb, rss / (1024 * 1024))
