"""How many refused requests become ledger events: few, however many arrive.

Every request refused for its token is counted, but a ledger event is written for at most one
per source address per :data:`WINDOW_S` seconds, and for at most :data:`MAX_PER_WINDOW` across
all sources in any such window: a flood of bad requests (or one from many addresses) cannot
fill the ledger. The refusals that were only counted are named in the next event written for
their source, and whatever is still unreported when the server stops is written as one last
event (:meth:`RefusalLimiter.unreported`).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

WINDOW_S = 60.0
"""Seconds during which one source gets at most one refusal event."""

MAX_PER_WINDOW = 10
"""Refusal events written in any window, across all sources."""

MAX_SOURCES = 4096
"""Sources remembered at once; past that, old ones are forgotten (their counts kept)."""


@dataclass
class _Source:
    last_recorded: float
    suppressed: int = 0


class RefusalLimiter:
    """Decides which refusals to record (see module). Not thread-safe: the server calls it
    from its event loop only."""

    def __init__(
        self,
        window_s: float = WINDOW_S,
        max_per_window: int = MAX_PER_WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._window = window_s
        self._max = max_per_window
        self._clock = clock
        self._sources: dict[str, _Source] = {}
        self._recent: deque[float] = deque()
        self._forgotten = 0

    def admit(self, source: str) -> int | None:
        """Count one refusal from ``source``. When it should be recorded, the number of
        refusals from ``source`` counted without an event since its last one (0 or more);
        None when it is only counted."""
        now = self._clock()
        while self._recent and now - self._recent[0] >= self._window:
            self._recent.popleft()
        seen = self._sources.get(source)
        if seen is not None and now - seen.last_recorded < self._window:
            seen.suppressed += 1
            return None
        if len(self._recent) >= self._max:
            self._remember(source, now - self._window).suppressed += 1
            return None
        earlier = seen.suppressed if seen is not None else 0
        self._remember(source, now).suppressed = 0
        self._recent.append(now)
        return earlier

    def unreported(self) -> dict[str, int]:
        """Refusals counted without an event so far, by source (sources forgotten meanwhile
        under ``"other sources"``); resets the counts."""
        counts = {k: s.suppressed for k, s in self._sources.items() if s.suppressed}
        if self._forgotten:
            counts["other sources"] = self._forgotten
        for kept in self._sources.values():
            kept.suppressed = 0
        self._forgotten = 0
        return counts

    def _remember(self, source: str, recorded_at: float) -> _Source:
        entry = self._sources.get(source)
        if entry is None:
            if len(self._sources) >= MAX_SOURCES:
                self._forget_oldest()
            entry = self._sources[source] = _Source(recorded_at)
        else:
            entry.last_recorded = max(entry.last_recorded, recorded_at)
        return entry

    def _forget_oldest(self) -> None:
        oldest = min(self._sources, key=lambda k: self._sources[k].last_recorded)
        self._forgotten += self._sources.pop(oldest).suppressed
