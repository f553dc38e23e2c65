"""Asking a running campaign to stop, in two steps (a person's first and second Ctrl-C).

The first request *drains*: no new experiment starts, the running ones finish and are kept,
then the campaign is ``stopped``. The second *cancels*: the running jobs are killed, their
experiments left open and their intents pending, so a resume runs them again as new attempts
of the same experiments. Both leave a campaign that ``rsilab resume`` continues.
:class:`EvolutionStop` carries a person's request to the running round of an evolution.
"""

from __future__ import annotations

import threading


class StopRequest:
    """A stop request that escalates. :meth:`request` belongs to the main thread (a signal
    handler runs there); any thread may read the state."""

    def __init__(self) -> None:
        self._drain = threading.Event()
        self._cancel = threading.Event()
        self._level = 0  # no lock: a lock taken in a signal handler can deadlock its thread

    def request(self) -> int:
        """Escalate one step and return the level reached: 1 drain, 2 cancel, 3 and more:
        the caller's to decide (the CLI then raises KeyboardInterrupt)."""
        self._level += 1
        level = self._level
        self._drain.set()
        if level >= 2:
            self._cancel.set()
        return level

    def drain(self) -> None:
        """Stop starting experiments (what a first request does; the wall budget does it too)."""
        self._drain.set()

    def cancel(self) -> None:
        """Kill running jobs now (the runner does it when it must end at once, on an error)."""
        self._drain.set()
        self._cancel.set()

    @property
    def requested(self) -> bool:
        """True once :meth:`request` was called (a person asked), not only :meth:`drain`."""
        return self._level > 0

    @property
    def draining(self) -> bool:
        """True once no new experiment may start."""
        return self._drain.is_set()

    @property
    def cancelling(self) -> bool:
        """True once running jobs are to be killed."""
        return self._cancel.is_set()


class EvolutionStop:
    """A person's request to stop an evolution, passed on to the round that runs.

    :meth:`request` escalates the running round's :class:`StopRequest` (the built-in runner
    drains, then cancels, as for ``rsilab run``) and says that no round is to start after it.
    Each round gets a fresh request, so a round's own wall budget (which drains its request)
    does not stop the next one.
    """

    def __init__(self) -> None:
        self._asked = False
        self._round = StopRequest()

    @property
    def asked(self) -> bool:
        """True once a person asked to stop: here, or on the round's own request (the
        built-in runner turns a KeyboardInterrupt on its thread into one)."""
        return self._asked or self._round.requested

    def request(self) -> int:
        """Ask to stop; the level the running round's request reached (see StopRequest)."""
        self._asked = True
        return self._round.request()

    def for_round(self) -> StopRequest:
        """The request of the round about to start."""
        self._asked = self.asked
        self._round = StopRequest()
        return self._round
