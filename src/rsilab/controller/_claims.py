"""Claims on controller work: lock files a process holds while it judges or baselines.

A candidate's judge holds ``<lab>/locks/candidate-<id>.lock`` (exclusive) from the moment it
starts until the candidate is decided; every baseline holds ``<lab>/locks/baseline.lock``
(shared). The kernel drops a process's locks when it dies, however it dies, so a claim that can
be taken proves that no live process does that work: recovery takes it (without waiting)
before it touches a candidate or the jobs of a baseline, and holds it while it does, so a
judge that starts meanwhile waits. Unlike a pid, a lock cannot be mistaken for a reused one.

A candidate claim is reentrant within the thread that holds it (recovery judges the candidate
it claimed); another thread of the same process waits like another process would. The file
of a candidate claim is removed by its last holder; a taker checks, once it holds the lock,
that the file it locked is still the one at that path (so a removed file is never trusted).
Locks are those of the machine the lab is on, like SQLite's own.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from rsilab.errors import LabError

LOCKS_DIR = "locks"
BASELINE_LOCK = "baseline.lock"

_guard = threading.Lock()
_held: dict[Path, tuple[int, int, int]] = {}
"""Candidate lock path -> (file descriptor, holding thread, depth) in this process."""


def candidate_lock_path(lab_path: Path, candidate_id: str) -> Path:
    """The lock file of judging ``candidate_id`` in the lab at ``lab_path``."""
    return Path(lab_path) / LOCKS_DIR / f"candidate-{candidate_id}.lock"


def baseline_lock_path(lab_path: Path) -> Path:
    """The lock file every baseline of the lab at ``lab_path`` holds shared."""
    return Path(lab_path) / LOCKS_DIR / BASELINE_LOCK


def _lock(path: Path, operation: int) -> int | None:
    """A descriptor of ``path`` locked with ``operation``; None when LOCK_NB was asked and
    the lock is held elsewhere.

    Raises:
        LabError: the locks folder cannot be written.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, operation)
            except BlockingIOError:
                os.close(fd)
                return None
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(path))
            except FileNotFoundError:
                same = False
            if same:
                return fd
            os.close(fd)  # its last holder removed it meanwhile: lock the current file
    except OSError as exc:
        raise LabError(
            f"cannot take the lock {path}: {exc.strerror or exc}",
            "check that the lab folder is writable",
        ) from exc


@contextlib.contextmanager
def candidate_claim(lab_path: Path, candidate_id: str, *, wait: bool = True) -> Iterator[bool]:
    """Hold the claim on judging ``candidate_id`` inside the block.

    Yields True when held. With ``wait`` False it yields False at once, holding nothing, when
    another thread or process holds it (that is, its judge is alive).

    Raises:
        LabError: the locks folder cannot be written.
    """
    path = candidate_lock_path(lab_path, candidate_id)
    me = threading.get_ident()
    with _guard:
        held = _held.get(path)
        if held is not None and held[1] == me:
            _held[path] = (held[0], me, held[2] + 1)
            reentered = True
        else:
            reentered = False
    if not reentered:
        fd = _lock(path, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        if fd is None:
            yield False
            return
        with _guard:
            _held[path] = (fd, me, 1)
    try:
        yield True
    finally:
        _release(path)


def _release(path: Path) -> None:
    with _guard:
        fd, me, depth = _held[path]
        if depth > 1:
            _held[path] = (fd, me, depth - 1)
            return
        del _held[path]
    with contextlib.suppress(OSError):
        path.unlink()  # while still locked: a taker that locked it sees it is gone
    os.close(fd)


@contextlib.contextmanager
def baseline_claim(lab_path: Path, *, exclusive: bool = False) -> Iterator[bool]:
    """Hold the lab's baseline lock inside the block: shared (a baseline evaluating; waits
    for an exclusive holder) or exclusive (recovery; never waits). Yields True when held,
    False when ``exclusive`` and a baseline is running in a live thread or process.

    Raises:
        LabError: the locks folder cannot be written.
    """
    operation = fcntl.LOCK_EX | fcntl.LOCK_NB if exclusive else fcntl.LOCK_SH
    fd = _lock(baseline_lock_path(lab_path), operation)
    if fd is None:
        yield False
        return
    try:
        yield True
    finally:
        os.close(fd)
