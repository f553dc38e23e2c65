"""How the overlap guard reads text: JSON escapes undone, numbers as written, lower case, and
tokens (runs of letters and digits) hashed to 64 bits, so a private sample's words are found
in any file however it was serialised (:mod:`rsilab.controller.overlap`)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import JsonValue

__all__ = [
    "MIN_LEAF_TOKENS",
    "Hashes",
    "canonical_text",
    "leaves",
    "normalise",
    "strings",
    "token_hashes",
    "token_list",
    "token_stream",
]

Hashes = npt.NDArray[np.uint64]
MIN_LEAF_TOKENS = 3  # a shorter text field ("cat", a city) is a word or two, not an item
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|[nrtbf])")
_ZERO_FRACTION = re.compile(r"(\d)\.0*(?!\d)")
# Both give the same tokens on ASCII text; the first is about twice as fast.
_ASCII_TOKEN = re.compile(r"\n|[a-z0-9]+")
_TOKEN = re.compile(r"\n|[^\W_]+")
_NEWLINE = int.from_bytes(hashlib.blake2b(b"\n", digest_size=8).digest(), "little")


def strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value, depth first."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def canonical_text(value: JsonValue) -> str:
    """A JSON value as one text (keys sorted, non-ASCII kept): what its tokens are read from."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _unescape(match: re.Match[str]) -> str:
    if match[1] is None:
        return " "
    char = chr(int(match[1], 16))
    return char if char.isalnum() else " "  # never a newline: line numbers must hold


def normalise(text: str) -> str:
    """Text as the tokeniser sees it: JSON escapes undone, 5.0 as 5, lower case."""
    return _ZERO_FRACTION.sub(r"\1", _ESCAPE.sub(_unescape, text)).lower()


def token_list(text: str) -> list[str]:
    """The tokens of ``text`` as :func:`token_stream` hashes them, line ends left out."""
    normal = normalise(text)
    return [t for t in (_ASCII_TOKEN if normal.isascii() else _TOKEN).findall(normal) if t != "\n"]


def leaves(value: Any) -> list[str]:
    """The text fields of a structured input with at least ``MIN_LEAF_TOKENS`` tokens (none
    for an input that is itself a text: it is indexed whole)."""
    if isinstance(value, str):
        return []
    return [leaf for leaf in strings(value) if len(token_list(leaf)) >= MIN_LEAF_TOKENS]


def token_stream(text: str) -> tuple[Hashes, npt.NDArray[np.int64]]:
    """Token hashes of ``text`` and the 1-based line (within ``text``) of each token."""
    normal = normalise(text)
    tokens = (_ASCII_TOKEN if normal.isascii() else _TOKEN).findall(normal)
    hashes = token_hashes(tokens)
    # Newlines are tokens only so that one findall over the whole text yields line numbers.
    newline = hashes == np.uint64(_NEWLINE)
    keep = ~newline
    return hashes[keep], (np.cumsum(newline, dtype=np.int64) + 1)[keep]


def token_hashes(tokens: Sequence[str]) -> Hashes:
    """A 64-bit blake2b hash per token (equal tokens, equal hashes, in every process)."""
    table = {
        token: int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
        for token in dict.fromkeys(tokens)
    }
    return np.fromiter(map(table.__getitem__, tokens), dtype=np.uint64, count=len(tokens))
