"""The in-sandbox search for private data: a stdlib-only program and its needles.

The program gets, on stdin, JSON ``{"needles": [[label, text], ...], "names": [...],
"paths": [...], "roots": [...], "seconds": S, "max_bytes": B}``. It tests whether each declared
data-source path exists; walks the roots in order (never following symlinks; skipping /proc,
/sys and /dev) for up to half the time, reporting files named like a data source; then, in the
time left, searches the bytes of each listed file up to ``max_bytes`` (gzip decompressed) for a
needle, any run of whitespace in a needle matching any run in the file. It prints one JSON
line per hit and a last line ``{"done": true, "files": N, "listed": M, "truncated": B}``.
Needles are serialized private items and, for text, a :data:`SLICE`-character slice from the
middle of each item's longest strings (so a copy inside a bigger file, or the source a text
was cleaned from, is found too); they exist only in this throwaway probe's memory and its
stdout goes back to the controller alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import JsonValue

from rsilab.tasks._samples import Sample

MIN_NEEDLE = 12
"""Shorter serializations are skipped: they would match by chance."""

SLICE = 48
"""Characters in a slice of a private string: long enough not to match by chance."""

SLICES_PER_ITEM = 2
"""Slices taken per private item (from its longest strings): each needle costs search time."""

PROBE_SOURCE = (Path(__file__).parent / "_probe_program.py").read_text("utf-8")
"""The probe program's text (``_probe_program.py``), run as ``python -I -c PROBE_SOURCE``."""


@dataclass(frozen=True)
class Hit:
    """Something private the probe could read: where, how (path, name, content) and what."""

    path: str
    kind: str
    label: str


def _forms(value: JsonValue) -> list[str]:
    forms = [
        json.dumps(value, separators=(",", ":")),
        json.dumps(value),
    ]
    if isinstance(value, str):
        forms.append(value)
    items = value if isinstance(value, list) else []
    numbers = [v for v in items if isinstance(v, int | float)]
    if numbers and len(numbers) == len(items):
        forms.append(",".join(str(v) for v in numbers))
        forms.append(",".join(str(float(v)) for v in numbers))
    return forms


def _strings(value: JsonValue) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    return []


def slices(value: JsonValue) -> list[str]:
    """A :data:`SLICE`-character slice from the middle of each of the (at most
    :data:`SLICES_PER_ITEM`) longest strings in ``value`` that are at least that long."""
    texts = sorted((t for t in _strings(value) if len(t) >= SLICE), key=len, reverse=True)
    found = []
    for text in texts[:SLICES_PER_ITEM]:
        start = (len(text) - SLICE) // 2
        found.append(text[start : start + SLICE].strip())
    return found


def needles(samples: Iterable[Sample], label: str) -> list[tuple[str, str]]:
    """(label, text) pairs: serializations of each sample's input and target and slices of
    its longest strings (:func:`slices`), long ones only."""
    found: dict[str, str] = {}
    for sample in samples:
        for part in (sample.input, sample.target):
            for text in [*_forms(part), *slices(part)]:
                if len(" ".join(text.split())) >= MIN_NEEDLE:
                    found.setdefault(text, f"{label} item {sample.id}")
    return [(name, text) for text, name in found.items()]
