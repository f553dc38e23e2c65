"""The standard streams exist, whatever the launcher closed.

A process started with descriptor 0, 1 or 2 closed (``rsilab ... <&-``, ``>&-``, some service
managers and cron setups) gets that number back from the next ``open`` or ``pipe`` it makes:
a pipe meant for a job's arguments then becomes its stdin when the job is spawned, and bwrap
reads the wrong descriptor; Python also leaves ``sys.stdout`` None, so the first ``print``
fails. So before anything else, each closed standard descriptor is opened on ``/dev/null``
(reads see end of file, writes are discarded), as ``nohup`` and daemons do, and the matching
``sys`` stream is made again. Open descriptors are left exactly as they are.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

_NAMES = ("stdin", "stdout", "stderr")


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def _text_stream(fd: int) -> TextIO:
    """A text stream on ``fd`` that lives as long as the process (never closes ``fd``)."""
    if fd == 0:
        return open(fd, encoding="utf-8", errors="replace", closefd=False)
    return open(fd, "w", encoding="utf-8", errors="backslashreplace", closefd=False)


def ensure_standard_streams() -> tuple[int, ...]:
    """Open each closed descriptor of 0, 1 and 2 on ``/dev/null`` and give ``sys`` a stream
    for it where Python had none; return the descriptors that were closed."""
    reopened = []
    for fd, name in enumerate(_NAMES):
        if _closed(fd):
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:  # the lowest free number is fd unless a lower one was taken
                os.dup2(null, fd)
                os.close(null)
            reopened.append(fd)
        if getattr(sys, name) is None:
            setattr(sys, name, _text_stream(fd))
    return tuple(reopened)
