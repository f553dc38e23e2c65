"""Progress from a team's researchers, said on the loop's thread.

Researchers act on their own threads (experiments, conclusions), but a campaign's progress
callback runs on the thread that started it; so a researcher's :class:`QueuedVoice` queues
what it says, named, and the loop says it with :meth:`QueuedVoice.flush`.
"""

from __future__ import annotations

import queue

from rsilab.orchestrator.builtin._context import Voice

_Said = tuple[str, str, float | None, float | None]


class QueuedVoice(Voice):
    """A researcher's voice: each line, prefixed with its name, waits for :meth:`flush`."""

    def __init__(self, voice: Voice, lines: queue.SimpleQueue[_Said], name: str) -> None:
        super().__init__(None, voice.budget)
        self.lines, self.name = lines, name

    def __call__(
        self, kind: str, message: str, score: float | None = None, best: float | None = None
    ) -> None:
        self.lines.put((kind, f"{self.name}: {message}", score, best))

    @staticmethod
    def flush(lines: queue.SimpleQueue[_Said], voice: Voice) -> None:
        """Say every queued line through ``voice`` (on the loop's thread)."""
        while True:
            try:
                kind, message, score, best = lines.get_nowait()
            except queue.Empty:
                return
            voice(kind, message, score, best)
