"""The reconnect window of a PostgreSQL store: one bound, shared by every call of the store,
on how long it waits for a server it lost.

Without it each call (a commit, each read) would start a wait of its own, and a run that
finds its server gone makes several calls in a row while it stops (the failed commit,
recording the stop, releasing its lease, the closing checkpoint, the summary's reads): the
waits would add up to minutes where the documentation promises seconds.
"""

from __future__ import annotations

import math
import threading
import time

from rsilab.errors import LabError

MIN_CONNECT_S = 2
"""psycopg's least connect timeout: it raises a smaller ``connect_timeout`` to 2 seconds, so
an attempt started with less time left can end up to this long after the window."""


class ReconnectWindow:
    """How long a store still waits for a lost server; thread-safe.

    - The window opens at the store's first lost connection since its last success
      (:meth:`lost`; for a connection that could not be made, when that attempt began:
      :meth:`failed_to_connect`) and lasts ``window_s``; any success (:meth:`reached`) closes
      it, so the next loss opens a fresh one.
    - Once the window is spent, a call still tries the server once (a server that came back
      is used at once), but no call waits again: :meth:`lost` answers the line the window
      ended on at the first failure. When the last attempt got no answer at all (it ran out
      its connect timeout: a dead host or network path), calls for the next ``window_s`` do
      not even try: :meth:`admit` refuses them at once with that line.
    - :meth:`connect_timeout` caps each connection attempt at the time left in the window
      (``connect_s`` while the server is reachable; :data:`MIN_CONNECT_S` once it is spent).
    """

    def __init__(self, window_s: float, connect_s: int) -> None:
        self._window_s = window_s
        self._connect_s = connect_s
        self._lock = threading.Lock()
        self._deadline: float | None = None  # None: the server was reachable last time
        self._spent: LabError | None = None  # the line the spent window ended on
        self._unanswered_at: float | None = None  # when an attempt last ran out its timeout

    def admit(self) -> None:
        """Let a call try the server, or raise the spent window's LabError at once when its
        last attempt went unanswered less than ``window_s`` ago."""
        with self._lock:
            if self._spent is None or self._unanswered_at is None:
                return
            if time.monotonic() - self._unanswered_at < self._window_s:
                raise LabError(self._spent.message, self._spent.hint)

    def failed_to_connect(self, began: float, *, unanswered: bool) -> None:
        """A connection attempt begun at ``began`` (``time.monotonic()``) found no server
        (``unanswered``: it ran out its timeout): the window opens then, not when the attempt
        gave up, so a server that does not answer at all costs the window, not the connect
        timeout on top of it."""
        with self._lock:
            if self._deadline is None:
                self._deadline = began + self._window_s
            self._unanswered_at = time.monotonic() if unanswered else None

    def lost(self, error: LabError) -> LabError | None:
        """Note a lost server (``error`` says so in one line). None while the window lasts
        (wait at most :meth:`left`, then try again); once it is spent, the LabError to raise:
        the line it ended on, the same for every later call."""
        with self._lock:
            now = time.monotonic()
            if self._deadline is None:
                self._deadline = now + self._window_s
            if self._spent is None and now < self._deadline:
                return None
            if self._spent is None:
                self._spent = error
            return LabError(self._spent.message, self._spent.hint)

    def left(self) -> float:
        """Seconds left in the window (``window_s`` when no server is lost now)."""
        with self._lock:
            if self._deadline is None:
                return self._window_s
            return max(0.0, self._deadline - time.monotonic())

    def reached(self) -> None:
        """The server answered: the outage (if any) is over."""
        with self._lock:
            self._deadline, self._spent, self._unanswered_at = None, None, None

    def connect_timeout(self) -> int:
        """The ``connect_timeout`` (whole seconds) of a connection attempt made now."""
        with self._lock:
            if self._deadline is None:
                return self._connect_s
            left = math.ceil(self._deadline - time.monotonic())
            return max(MIN_CONNECT_S, min(self._connect_s, left))
