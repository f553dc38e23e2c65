"""Raw numeric binaries: a file of bare numbers read as rows of the widths private items have.

A file in no form the guard knows (no container, npy, pickle, safetensors, nor text) may still
be a matrix written with ``tobytes()``: nothing in it says its item type, byte order or row
width. :func:`interpretations` tries the ones that can hold a private item: each width in
``widths`` (the items' length, and one more for a label) times each item type of
:data:`DTYPES` in both byte orders, rows along the file and, for data kept feature-major,
along its columns. An interpretation whose values cannot be numbers a table holds (not finite,
astronomically large, or mostly denormal: the bytes are not of that type) is left out, so the
matcher sees a few tables per file. Which of them match is
:class:`~rsilab.controller.numeric.NumericReference`'s call, held to :data:`EXPLAINED`.

Cost is bounded by the caller: :func:`may_hold_rows` says whether a file's size fits a width,
and the content guard refuses such a file above its cap rather than skip it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import numpy.typing as npt

from rsilab.controller.numeric import MIN_ROWS

__all__ = ["DTYPES", "EXPLAINED", "interpretations", "is_binary", "may_hold_rows"]

_Table = npt.NDArray[np.float64]

DTYPES = ("f8", "f4", "f2", "i8", "i4", "i2", "u2", "i1", "u1")
"""Item types tried (multi-byte ones in both byte orders)."""
EXPLAINED = 0.5
"""Share of a reading's rows that must match an item, private or public, with confidence
before its hits count (:meth:`~rsilab.controller.numeric.NumericReference.match`): among
dozens of guessed readings one can hold look-alikes by chance (the top halves of float64
read as float16 do), while the right reading of a copy, disguised or mixed with public rows,
explains most of its rows."""
_MAX_ABS = 1e12  # larger values are bytes of another type, not data
_TINY = 1e-30  # nonzero floats this small are bytes of another type read as floats
_CONTROL = frozenset(range(32)) - {9, 10, 12, 13}


def is_binary(data: bytes) -> bool:
    """Whether ``data`` is not text: a NUL byte, invalid UTF-8, or over 1% control characters
    in its first 64 KiB."""
    head = data[: 1 << 16]
    if b"\0" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not just a character cut at the edge
            return True
    return sum(b in _CONTROL for b in head) > 0.01 * max(len(head), 1)


def may_hold_rows(size: int, widths: Iterable[int]) -> bool:
    """Whether ``size`` bytes can be whole rows of one of ``widths`` in one of :data:`DTYPES`
    (at least :data:`~rsilab.controller.numeric.MIN_ROWS` of them)."""
    return any(
        size % (w * np.dtype(d).itemsize) == 0 and size >= MIN_ROWS * w * np.dtype(d).itemsize
        for w in widths
        for d in DTYPES
    )


def interpretations(data: bytes, widths: Iterable[int]) -> Iterator[tuple[str, _Table]]:
    """``(label, table)`` for each plausible reading of ``data`` as rows of one of ``widths``
    (label: item type, width and ``T`` when read feature-major)."""
    for dtype in _dtypes():
        size = dtype.itemsize
        if len(data) % size:
            continue
        values: npt.NDArray[np.float64] | None = None
        for width in sorted(set(widths)):
            count = len(data) // size
            if count % width or count < MIN_ROWS * width:
                continue
            if values is None:
                values = _values(data, dtype)
                if values is None:
                    break
            yield f"{dtype.str}x{width}", values.reshape(-1, width)
            yield f"{dtype.str}x{width}T", np.ascontiguousarray(values.reshape(width, -1).T)


def _dtypes() -> Iterator[np.dtype[np.generic]]:
    for name in DTYPES:
        little = np.dtype("<" + name)
        yield little
        if little.itemsize > 1:
            yield little.newbyteorder(">")


def _values(data: bytes, dtype: np.dtype[np.generic]) -> npt.NDArray[np.float64] | None:
    """``data`` as floats when it is plausibly of ``dtype``, else None."""
    raw = np.frombuffer(data, dtype=dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        values = raw.astype(np.float64)
    if not np.isfinite(values).all():
        return None
    magnitude = np.abs(values)
    if magnitude.max(initial=0.0) > _MAX_ABS:
        return None
    if dtype.kind == "f" and np.count_nonzero((magnitude > 0) & (magnitude < _TINY)) > 0.01 * len(
        values
    ):
        return None
    return values
