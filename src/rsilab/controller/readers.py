"""Reading what a file holds: values and numeric tables, in the forms training data takes.

:func:`read` takes one file's bytes (already out of any container, see
:mod:`rsilab.controller.unpack`) and returns a :class:`Parsed`: the values it holds (JSON,
JSON Lines, a pickle read by :mod:`rsilab.controller.safe_pickle`, a numpy ``.npy`` array,
the tensors of a safetensors file) and the numeric tables found in them or in delimited text
(CSV, TSV, whitespace columns). The form is told from the bytes (:func:`binary_format`),
never from the file's name.

A numeric table is rows x columns of floats: an array or rectangular nested list of two or
more dimensions (rows along the first axis, the rest flattened; a 2-D one, and a delimited
table, is also offered transposed, for data kept feature-major), the numeric vectors that are
the values of records (``{"input": [...]}`` in JSON Lines, an image under a key), grouped by
length, records of at
least :data:`~rsilab.controller.numeric.MIN_COLUMNS` numeric fields, and column-oriented
records (equal-length numeric lists under names). Walking a value is bounded by
``max_values``; going past it raises :class:`~rsilab.controller.unpack.Uncheckable`.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from rsilab.controller import safe_pickle
from rsilab.controller.numeric import MIN_COLUMNS
from rsilab.controller.unpack import Uncheckable

__all__ = ["Parsed", "binary_format", "plain_json", "read"]

_Table = npt.NDArray[np.float64]
_NPY = b"\x93NUMPY"
_PICKLE_OPENERS = b"(]}cl"  # how protocol 0 and 1 pickles of data begin
_SAFETENSORS_DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
    "I8": "i1", "U8": "u1", "U64": "<u8", "U32": "<u4", "U16": "<u2",
}  # fmt: skip
_MAX_SAFETENSORS_HEADER = 100 << 20
_DELIMITERS = (",", "\t", ";", "|", None)
_NUMBER = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
_MAX_LINES = 1_000_000


@dataclass
class Parsed:
    """What one file holds, as far as the content guard reads it."""

    values: list[Any] = field(default_factory=list)
    """Parsed values (a JSON document, each JSON line, a pickle's data, an array)."""
    binary: bool = False
    """Whether the values came from a binary form (pickle, npy) the text scan cannot read."""
    tables: list[_Table] = field(default_factory=list)
    """Numeric tables, rows x columns."""


def read(where: str, data: bytes, *, max_values: int = 20_000_000) -> Parsed:
    """The values and numeric tables ``data`` holds (see the module docstring).

    Raises:
        Uncheckable: walking the values passes ``max_values``.
    """
    parsed = Parsed()
    tables = _Tables(where, max_values)
    kind = binary_format(data)
    if kind == "npy":
        array = _npy(data)
        if array is not None:
            parsed.values, parsed.binary = [array], True
    elif kind == "safetensors":
        parsed.values, parsed.binary = list(_safetensors(data).values()), True
    elif kind == "pickle":
        with contextlib.suppress(ValueError):  # not a pickle after all: read as text below
            parsed.values, parsed.binary = [safe_pickle.load(data)], True
    if not parsed.binary:
        text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
        parsed.values = _json_values(text)
        table = None if parsed.values else _delimited(text)  # JSON is not delimited text
        if table is not None:
            tables.add(table)
    parsed.tables.extend(tables.of(parsed.values))
    return parsed


def binary_format(data: bytes) -> str | None:
    """``"npy"``, ``"safetensors"`` or ``"pickle"`` when ``data`` starts as one does (a
    pickle of protocol 0 or 1 only when it also ends with the STOP opcode), else None."""
    if data.startswith(_NPY):
        return "npy"
    if _safetensors_header(data) is not None:
        return "safetensors"
    if len(data) > 2 and data[0] == 0x80 and 2 <= data[1] <= 5:
        return "pickle"
    if len(data) > 2 and data[0] in _PICKLE_OPENERS and data.rstrip()[-1:] == b".":
        return "pickle"
    return None


def _safetensors_header(data: bytes) -> dict[str, Any] | None:
    """The JSON header of a safetensors file (8-byte little-endian length, then JSON), or
    None when ``data`` is not laid out so."""
    if len(data) < 10 or data[8:9] != b"{":
        return None
    size = int.from_bytes(data[:8], "little")
    if size < 2 or size > min(len(data) - 8, _MAX_SAFETENSORS_HEADER):
        return None
    try:
        header = json.loads(data[8 : 8 + size])
    except (ValueError, RecursionError):
        return None
    return header if isinstance(header, dict) else None


def _safetensors(data: bytes) -> dict[str, Any]:
    """The tensors of a safetensors file by name (each a table of its own, not a record's
    fields); one whose dtype numpy cannot hold, or whose offsets or shape do not fit, is
    left out."""
    header = _safetensors_header(data) or {}
    start = 8 + int.from_bytes(data[:8], "little")
    out: dict[str, Any] = {}
    for name, spec in header.items():
        if not isinstance(spec, dict) or name == "__metadata__":
            continue
        try:
            begin, end = (int(v) for v in spec["data_offsets"])
            shape = [int(v) for v in spec["shape"]]
            raw = data[start + begin : start + end]
            if spec["dtype"] == "BF16":  # the high half of a float32
                wide = np.frombuffer(raw, dtype="<u2").astype("<u4") << 16
                array = wide.view("<f4")
            else:
                array = np.frombuffer(raw, dtype=np.dtype(_SAFETENSORS_DTYPES[spec["dtype"]]))
            out[str(name)] = array.reshape(shape).astype(np.float64)
        except (KeyError, TypeError, ValueError):
            continue
    return out


def plain_json(values: list[Any]) -> str:
    """``values`` as JSON text (arrays as lists, opaque objects as what built them, sets as
    lists, bytes and keys JSON cannot hold left out), for the text scans of data that came in
    binary form."""

    def fallback(item: Any) -> Any:
        item = safe_pickle.resolve(item)
        if isinstance(item, list | tuple | dict | str | int | float):
            return item  # a placeholder that stood for plain data (an object array's items)
        if isinstance(item, np.ndarray):
            return item.tolist()
        if isinstance(item, np.generic):
            return item.item()
        if isinstance(item, safe_pickle.Opaque):
            return item.parts
        if isinstance(item, set | frozenset):
            return list(item)
        return None

    lines = []
    for value in values:
        try:
            lines.append(json.dumps(value, default=fallback, skipkeys=True))
        except (RecursionError, ValueError):  # nested past the encoder's depth, or cyclic
            continue
    return "\n".join(lines)


def _npy(data: bytes) -> Any:
    stream = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(stream)
        header = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        _, _, dtype = header(stream)
        if dtype.hasobject:  # the items are a pickle after the header: read it safely
            return safe_pickle.load(data[stream.tell() :])
        stream.seek(0)
        return np.load(stream, allow_pickle=False)
    except (ValueError, OSError, EOFError):
        return None


def _json_values(text: str) -> list[Any]:
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            return [json.loads(stripped)]
        except (ValueError, RecursionError):
            pass
    values = []
    for line in text.splitlines():
        line = line.strip()
        if line[:1] in ("{", "["):
            try:
                values.append(json.loads(line))
            except (ValueError, RecursionError):
                continue
    return [values] if values else []


def _delimited(text: str) -> _Table | None:
    """The numeric columns of delimited text (rows that parse), or None."""
    lines = [line for line in text.splitlines()[:_MAX_LINES] if line.strip()]
    if len(lines) < 2:
        return None
    best: _Table | None = None
    for delimiter in _DELIMITERS:
        table = _columns(lines, delimiter)
        if table is not None and (best is None or table.size > best.size):
            best = table
    return best


def _columns(lines: list[str], delimiter: str | None) -> _Table | None:
    rows = [line.split(delimiter) for line in lines]
    widths: dict[int, int] = defaultdict(int)
    for row in rows:
        widths[len(row)] += 1
    width, count = max(widths.items(), key=lambda item: (item[1], item[0]))
    if width < 2 or count < 0.5 * len(rows):
        return None
    kept = [[cell.strip().strip("\"'") for cell in row] for row in rows if len(row) == width]
    numeric = [
        c
        for c in range(width)
        if sum(bool(_NUMBER.match(r[c])) for r in kept) >= max(2, 0.75 * len(kept))
    ]
    if len(numeric) < 2:
        return None
    good = [r for r in kept if all(_NUMBER.match(r[c]) for c in numeric)]
    if len(good) < 2:
        return None
    return np.array([[float(r[c]) for c in numeric] for r in good], dtype=np.float64)


class _Tables:
    """Numeric tables found by walking values (see the module docstring)."""

    def __init__(self, where: str, budget: int) -> None:
        self.where = where
        self.budget = budget
        self.tables: list[_Table] = []
        self.rows: dict[tuple[str, int], list[_Table]] = defaultdict(list)

    def of(self, values: list[Any]) -> list[_Table]:
        seen: set[int] = set()
        stack: list[tuple[Any, bool]] = [(v, False) for v in reversed(values)]
        while stack:  # depth first, in document order (rows keep their order)
            item, in_record = stack.pop()
            item = safe_pickle.resolve(item)
            if isinstance(item, dict | list | safe_pickle.Opaque | np.ndarray):
                if id(item) in seen:
                    continue
                seen.add(id(item))
            stack.extend(reversed(list(self._visit(item, in_record))))
        for rows in self.rows.values():
            self.add(np.vstack(rows))
        return self.tables

    def _spend(self, count: int) -> None:
        self.budget -= count
        if self.budget < 0:
            raise Uncheckable(self.where, "more values than the guard walks in one file")

    def _visit(self, item: Any, in_record: bool) -> Iterator[tuple[Any, bool]]:
        self._spend(1)
        if isinstance(item, safe_pickle.Opaque):
            yield from ((part, False) for part in item.parts)
        elif isinstance(item, dict):
            yield from self._record(item)
        elif isinstance(item, list | tuple | np.ndarray):
            array = _numeric(item)
            if array is None:
                children = item.tolist() if isinstance(item, np.ndarray) else item
                yield from ((child, False) for child in children)
                return
            self._spend(array.size)
            if array.ndim == 1 or in_record:
                if array.size >= MIN_COLUMNS:
                    self.rows[("row", array.size)].append(array.reshape(1, -1))
            else:
                self.add(array.reshape(len(array), -1))

    def _record(self, record: dict[Any, Any]) -> Iterator[tuple[Any, bool]]:
        scalars = {k: v for k, v in record.items() if _is_number(v)}
        if len(scalars) >= MIN_COLUMNS:
            keys = sorted(map(str, scalars))
            self.rows[("record:" + "\x1f".join(keys)[:500], len(keys))].append(
                np.array([[float(record[k]) for k in scalars]], dtype=np.float64)
            )
        columns = [v for v in record.values() if isinstance(v, list) and v and _is_number(v[0])]
        lengths = {len(c) for c in columns}
        if len(columns) >= MIN_COLUMNS and len(lengths) == 1:
            stacked = _numeric(columns)
            if stacked is not None and stacked.ndim == 2:
                self.add(stacked.T)
        yield from ((value, True) for value in record.values())

    def add(self, table: _Table) -> None:
        """Keep ``table``, and its transpose when both sides are wide enough to be rows."""
        if table.ndim != 2 or table.size == 0:
            return
        self.tables.append(table)
        if table.shape[0] >= MIN_COLUMNS and table.shape[1] >= MIN_COLUMNS:
            self.tables.append(np.ascontiguousarray(table.T))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _numeric(item: Any) -> _Table | None:
    """``item`` as a float array when it is a rectangular array of numbers, else None."""
    if isinstance(item, np.ndarray):
        if item.dtype.kind in "biuf" and item.size:
            return item.astype(np.float64, copy=False)
        return None
    if not item or isinstance(item[0], str | dict):
        return None
    try:
        array = np.array(item, dtype=np.float64)
    except (ValueError, TypeError, OverflowError):
        return None
    return array if array.size else None
