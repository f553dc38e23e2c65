"""The supervision loop both sandboxes share: feed stdin, read and cap output, enforce limits.

One thread runs the loop for one job; stdin is written by a helper thread so a job that never
reads it cannot stall the loop. The loop polls every ``TICK_S``: cheap checks (a few small
cgroup files) at that rate, the workspace size less often (see ``DiskWatch``).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import IO

from rsilab.sandbox._stopped import StoppedWatch
from rsilab.sandbox.base import KillReason, Limits, RunResult

TICK_S = 0.1
DRAIN_S = 2.0
"""After the job's main process ends, how long to wait for its output pipes to close."""


@dataclass
class Watch:
    """The sandbox-specific parts: a limit check, how to end the whole tree, and how to list
    its processes (host pids), so that one left stopped can be continued (``_stopped``)."""

    check: Callable[[], KillReason | None]
    kill: Callable[[], None]
    pids: Callable[[], Iterable[int]]


@dataclass
class Supervised:
    """What the loop saw."""

    returncode: int
    killed: KillReason | None
    wall_s: float
    rusage_cpu_s: float
    rusage_maxrss_mb: float
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stdout_dropped: int = 0
    stderr_dropped: int = 0
    notes: list[str] = field(default_factory=list)

    def result(
        self,
        *,
        exit_code: int | None,
        signal: int | None,
        killed: KillReason | None,
        cpu_s: float,
        peak_memory_mb: float,
        notes: list[str],
    ) -> RunResult:
        """The RunResult of this run, with the sandbox's own accounting and notes."""
        return RunResult(
            exit_code=exit_code,
            signal=signal,
            killed=killed,
            stdout=self.stdout,
            stderr=self.stderr,
            stdout_truncated=self.stdout_truncated,
            stderr_truncated=self.stderr_truncated,
            stdout_dropped=self.stdout_dropped,
            stderr_dropped=self.stderr_dropped,
            wall_s=self.wall_s,
            cpu_s=cpu_s,
            peak_memory_mb=peak_memory_mb,
            notes=tuple(notes),
        )


def _feed(pipe: IO[bytes] | None, data: bytes) -> None:
    if pipe is None:
        return
    with contextlib.suppress(OSError):  # the job may exit or close stdin without reading it
        if data:
            pipe.write(data)
            pipe.flush()
    with contextlib.suppress(OSError):
        pipe.close()


class _Loop:
    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        limits: Limits,
        watch: Watch,
        cancel: threading.Event | None,
        on_output: Callable[[int, bytes], None] | None = None,
    ) -> None:
        self.proc, self.limits, self.watch, self.cancel = proc, limits, watch, cancel
        self.on_output = on_output
        self.streams: dict[int, int] = {}
        """pipe fd -> the job's fd it carries (1 or 2), for ``on_output``."""
        self.buffers: dict[int, bytearray] = {}
        self.truncated: dict[int, bool] = {}
        self.dropped: dict[int, int] = {}
        """pipe fd -> bytes over the cap, when ``limits.truncate_output`` keeps the job going."""
        self.killed: KillReason | None = None
        self.stops = StoppedWatch(watch.pids)
        self.status: int | None = None
        self.rusage: tuple[float, float] = (0.0, 0.0)
        self.selector = selectors.DefaultSelector()
        for job_fd, pipe in ((1, proc.stdout), (2, proc.stderr)):
            if pipe is not None:
                fd = pipe.fileno()
                self.streams[fd] = job_fd
                self.buffers[fd], self.truncated[fd], self.dropped[fd] = bytearray(), False, 0
                self.selector.register(fd, selectors.EVENT_READ)
        # A pidfd wakes the loop the moment the main process ends, not a tick later.
        self.pidfd: int | None = None
        with contextlib.suppress(AttributeError, OSError):
            self.pidfd = os.pidfd_open(proc.pid)
            self.selector.register(self.pidfd, selectors.EVENT_READ)

    def kill(self, reason: KillReason) -> None:
        if self.killed is None:
            self.killed = reason
        self.watch.kill()

    def read_ready(self, timeout: float) -> None:
        if not self.selector.get_map():
            time.sleep(timeout)  # no pipes left to wait on; just pace the exit checks
            return
        for key, _ in self.selector.select(timeout):
            fd = int(key.fd)
            if fd == self.pidfd:
                self._close_pidfd()
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                self.selector.unregister(fd)
                continue
            buffer, room = self.buffers[fd], self.limits.output_bytes - len(self.buffers[fd])
            kept = chunk[: max(room, 0)]
            buffer += kept
            if self.on_output is not None and kept:
                self.on_output(self.streams[fd], kept)
            if len(chunk) > room:
                self.dropped[fd] += len(chunk) - len(kept)
                if not self.truncated[fd] and not self.limits.truncate_output:
                    self.kill(KillReason.OUTPUT)
                self.truncated[fd] = True

    def _close_pidfd(self) -> None:
        if self.pidfd is not None:
            self.selector.unregister(self.pidfd)
            os.close(self.pidfd)
            self.pidfd = None

    def close(self) -> None:
        """Release the pidfd and the selector. Idempotent."""
        self._close_pidfd()
        self.selector.close()

    def due(self, now: float, deadline: float) -> KillReason | None:
        """The reason to end the job now, if any; a cancellation wins over every limit."""
        if self.cancel is not None and self.cancel.is_set():
            return KillReason.CANCELLED
        if now >= deadline:
            return KillReason.WALL_TIME
        return self.watch.check()

    def reap(self) -> bool:
        """True once the main process has ended; keeps its rusage (it covers reaped children)."""
        if self.status is not None:
            return True
        pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
        if pid == 0:
            return False
        self.status = os.waitstatus_to_exitcode(status)
        self.proc.returncode = self.status  # reaped here, so Popen must not wait again
        self.rusage = (usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)
        return True

    def reap_blocking(self) -> None:
        """Wait for the main process (already killed) so no zombie is left behind."""
        with contextlib.suppress(ChildProcessError):
            while not self.reap():
                time.sleep(TICK_S)

    def run(self, started: float) -> Supervised:
        deadline = started + self.limits.wall_s
        ended_at: float | None = None
        killed_at = 0.0
        while True:
            self.read_ready(TICK_S)
            now = time.monotonic()
            if ended_at is None and self.reap():
                ended_at = now
                self.watch.kill()  # a job is its whole tree: nothing outlives the main process
            if ended_at is None and self.killed is None:
                self.stops.check(now)
                reason = self.due(now, deadline)
                if reason is not None:
                    self.kill(reason)
                    killed_at = now
            elif ended_at is None and now > killed_at + 0.25:
                self.watch.kill()  # keep killing until the tree is gone (forks in flight)
                killed_at = now
            if ended_at is not None:
                self._close_pidfd()
                if not self.selector.get_map() or now > ended_at + DRAIN_S:
                    break
        self._close_pidfd()
        cut = bool(self.selector.get_map())  # a pipe still open: an escaped process holds it
        self.close()
        assert self.status is not None
        return self._result(ended_at - started, cut)

    def _result(self, wall_s: float, cut: bool) -> Supervised:
        out, err = (p.fileno() if p else -1 for p in (self.proc.stdout, self.proc.stderr))
        result = Supervised(
            returncode=self.status if self.status is not None else -9,
            killed=self.killed,
            wall_s=wall_s,
            rusage_cpu_s=self.rusage[0],
            rusage_maxrss_mb=self.rusage[1],
            stdout=bytes(self.buffers.get(out, b"")),
            stderr=bytes(self.buffers.get(err, b"")),
            stdout_truncated=self.truncated.get(out, False),
            stderr_truncated=self.truncated.get(err, False),
            stdout_dropped=self.dropped.get(out, 0),
            stderr_dropped=self.dropped.get(err, 0),
        )
        if cut:
            result.notes.append("an escaped process kept the output open; output may be cut")
        stops = self.stops.note()
        if stops is not None:
            result.notes.append(stops)
        return result


def supervise(
    proc: subprocess.Popen[bytes],
    stdin: bytes,
    limits: Limits,
    watch: Watch,
    started: float,
    cancel: threading.Event | None = None,
    on_output: Callable[[int, bytes], None] | None = None,
) -> Supervised:
    """Run the loop until the job's main process has ended and its output is drained.

    The whole tree is killed when the main process ends, at the first limit hit (output over
    ``limits.output_bytes`` on either stream unless ``limits.truncate_output``, wall time, or
    what ``watch.check`` reports), within a tick of ``cancel`` being set (reported as
    ``KillReason.CANCELLED``), or if this loop fails. ``started`` is the ``time.monotonic()``
    of the launch. ``on_output`` sees each chunk kept, as ``RunSpec.on_output`` describes.
    """
    writer = threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True)
    writer.start()
    loop = _Loop(proc, limits, watch, cancel, on_output)
    try:
        result = loop.run(started)
    except BaseException:
        watch.kill()
        loop.reap_blocking()
        loop.close()
        raise
    finally:
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    writer.join(timeout=DRAIN_S)
    return result
