"""Text in a Unicode encoding other than UTF-8, recognised by its bytes and read as UTF-8.

Every reader of the content guard (:mod:`rsilab.controller.readers`,
:mod:`rsilab.controller.overlap`) reads text as UTF-8. The same text saved as UTF-16 or
UTF-32 shares no byte sequence with it (every ASCII letter is followed or preceded by NUL
bytes), so without this module such a copy would be read as a binary. :func:`unicode_text`
tells these encodings from their bytes, never from a file's name, in one of two ways:

- a **byte order mark** at the start: UTF-32 (``00 00 FE FF``, ``FF FE 00 00``) is tested
  before UTF-16 (``FE FF``, ``FF FE``), whose little-endian mark begins UTF-32's;
- without one, the **pattern of NUL bytes**: text in the Latin range (letters, digits,
  punctuation, the bulk of any data a benchmark holds) written as UTF-32 has NUL in the two
  high bytes of every 4-byte unit, and as UTF-16 in the high byte of most 2-byte units,
  on one side of each unit only; which side gives the byte order.

Either way the decoded start must read as text (:func:`_reads_as_text`: at most 1% of its
characters controls, NULs or undecodable units), so a binary whose bytes happen to begin like
a mark, or numbers of 16 bits stored little-endian, is not taken for text. The whole file is
then decoded (undecodable units as U+FFFD) and handed back as UTF-8.

:class:`~rsilab.controller.unpack.Opener` yields that UTF-8 text as one more layer of the file,
as it does the decoding of base64: the file is still read as it is too, so a wrong guess costs
a reading, never a finding. Out of reach: UTF-16 without a mark whose text is outside the
Latin range (CJK: no NUL pattern), and legacy 8-bit code pages (nothing in their bytes tells
them apart; their ASCII part is read as UTF-8 reads it).
"""

from __future__ import annotations

__all__ = ["HEAD", "unicode_text"]

HEAD = 1 << 16
"""Bytes at the start of a file that decide its encoding (a multiple of 4)."""
_BOMS = (
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\xfe\xff", "utf-16-be"),
    (b"\xff\xfe", "utf-16-le"),
)
_MIN_UNITS = 8  # fewer characters than this say nothing about an encoding
_LATIN_SHARE = 0.3
"""Share of UTF-16 units with a NUL high byte above which the NUL pattern says UTF-16: ASCII
text has it near 1, accented Latin text near 1 too, CJK text near 0."""
_STRAY_SHARE = 0.05
"""Share of NUL bytes on the side of a unit that holds the character's low byte, below which
the pattern is one of text (a low byte is NUL only for U+0000, U+0100, ...)."""
_MAX_BAD = 0.01
_TEXT_CONTROLS = frozenset("\t\n\v\f\r")


def unicode_text(data: bytes) -> tuple[str, bytes] | None:
    """``(encoding, the text as UTF-8)`` when ``data`` is text in UTF-16 or UTF-32 (either
    byte order, with or without a byte order mark; see the module docstring), else None.

    The byte order mark is not kept. Never raises: undecodable units become U+FFFD.
    """
    encoding = _encoding(data)
    if encoding is None:
        return None
    text = data.decode(encoding, errors="replace").removeprefix("\ufeff")
    return encoding, text.encode("utf-8", errors="replace")


def _encoding(data: bytes) -> str | None:
    """The UTF-16 or UTF-32 codec ``data`` is written in, or None."""
    for mark, encoding in _BOMS:
        if data.startswith(mark):
            return encoding if _reads_as_text(data, encoding) else None
    if b"\0" not in data[:HEAD]:
        return None  # the cheap common case: UTF-8 or another 8-bit form
    head = data[: HEAD - HEAD % 4]
    zeros = [_zero_share(head[k::4]) for k in range(4)]
    candidates = []
    # UTF-32: the top byte of every unit is NUL (no code point passes U+10FFFF), the next
    # almost always (only characters past U+FFFF set it), the lowest almost never
    if min(zeros[2], zeros[3]) >= 1 - _STRAY_SHARE and zeros[0] < _STRAY_SHARE:
        candidates.append("utf-32-le")
    if min(zeros[0], zeros[1]) >= 1 - _STRAY_SHARE and zeros[3] < _STRAY_SHARE:
        candidates.append("utf-32-be")
    even, odd = _zero_share(head[0::2]), _zero_share(head[1::2])
    if odd >= _LATIN_SHARE and even < _STRAY_SHARE:
        candidates.append("utf-16-le")
    if even >= _LATIN_SHARE and odd < _STRAY_SHARE:
        candidates.append("utf-16-be")
    return next((c for c in candidates if _reads_as_text(data, c)), None)


def _zero_share(part: bytes) -> float:
    return part.count(0) / max(len(part), 1)


def _reads_as_text(data: bytes, encoding: str) -> bool:
    """Whether the start of ``data`` decoded as ``encoding`` is text: at least a few
    characters, of which at most 1% are controls (other than white space), NULs or units
    that do not decode."""
    head = data[: HEAD - HEAD % 4]
    text = head.decode(encoding, errors="replace").removeprefix("\ufeff")
    if len(text) < _MIN_UNITS:
        return False
    bad = sum(1 for c in text if (c < " " and c not in _TEXT_CONTROLS) or c in "\x7f\ufffd")
    return bad <= _MAX_BAD * len(text)
