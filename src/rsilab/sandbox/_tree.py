"""Sampling a process tree through /proc, where no cgroup counts it for us.

Used by the process sandbox and by bwrap without cgroups: every ``interval`` the tree under
one root pid is found by parent links and its CPU time (own plus reaped children) and
resident size are summed. Between samples a short-lived spike can be missed, so figures are
lower bounds.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _stats() -> dict[int, tuple[int, float, int]]:
    """pid -> (parent pid, CPU seconds incl. reaped children, resident bytes) for all pids."""
    found: dict[int, tuple[int, float, int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            text = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2 :].split()
        if len(fields) < 22:
            continue
        ticks = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
        found[int(entry.name)] = (int(fields[1]), ticks / _TICKS, int(fields[21]) * _PAGE)
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
        stats = _stats()
        children: dict[int, list[int]] = {}
        for pid, (parent, _, _) in stats.items():
            children.setdefault(parent, []).append(pid)
        cpu, rss, todo = 0.0, 0, [self.root]
        while todo:
            pid = todo.pop()
            if pid in stats:
                cpu += stats[pid][1]
                rss += stats[pid][2]
            todo += children.get(pid, [])
        self.cpu_s = max(self.cpu_s, cpu)
        self.peak_mb = max(self.peak_mb, rss / (1024 * 1024))
