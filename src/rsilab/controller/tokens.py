"""How the overlap guard reads text: JSON escapes undone, numbers as written, lower case, and
tokens (runs of letters and digits) hashed to 64 bits, so a private sample's words are found
in any file however it was serialised (:mod:`rsilab.controller.overlap`).

The same text can be written with other characters that read alike. :func:`normalise` folds
them into one spelling, on the private items and on the data alike (a copy and its source
then give the same tokens, and honest data the tokens the public tiers give):

- **compatibility forms** (NFKC): fullwidth letters and digits, mathematical alphanumerics
  (bold, script, double-struck letters), ligatures, no-break and other spaces become the
  plain characters;
- **invisible characters** are dropped (:data:`INVISIBLE`: every format character, category
  Cf, such as the zero-width space and joiners, the word joiner, the soft hyphen and U+FEFF,
  and the other default-ignorable code points: variation selectors, Hangul fillers);
- **confusable letters**: Cyrillic, Greek and a few other letters drawn like Latin ones
  (:data:`CONFUSABLES`: Cyrillic a, e, o, p, c, x, y, i, Greek Alpha, Beta, Omicron, Rho
  ...) become those Latin letters, case by case before lower case (Greek capital Eta is
  drawn H, its small letter n);
- **interleaved text**: a run of single characters (letters, digits, spaces) with the same
  punctuation or symbol between each two (``p~a~r~i~s``, ``W.h.a.t. .i.s``) loses that
  separator when a run of its line with that separator holds two letters or more
  (:func:`_collapse`): ``h~a~s 1~2`` reads ``has 12``, while a run of digits alone
  (``0,0,5,1`` in a CSV) keeps its tokens, as do hyphenated words (``e-mail``).

Python's ``unicodedata`` has no confusables table (Unicode's UTS #39 data), so
:data:`CONFUSABLES` is a compact one of its own, for the letters most often used to disguise
Latin text. Out of reach: letters interleaved with spaces or with letters, separators longer
than one character or changing along a run, combining marks added to letters, and homoglyphs
from scripts the table leaves out.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Iterator, Sequence
from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import JsonValue

__all__ = [
    "CONFUSABLES",
    "INVISIBLE",
    "MIN_LEAF_TOKENS",
    "Hashes",
    "canonical_text",
    "fold",
    "leaves",
    "normalise",
    "strings",
    "token_hashes",
    "token_list",
    "token_stream",
]

Hashes = npt.NDArray[np.uint64]
MIN_LEAF_TOKENS = 3  # a shorter text field ("cat", a city) is a word or two, not an item
# a surrogate pair first: json.dumps writes a character past U+FFFF (a bold letter) as two
_ESCAPE = re.compile(
    r"\\u([dD][89abAB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})"
    r"|\\(?:u([0-9a-fA-F]{4})|[nrtbf])"
)
_ZERO_FRACTION = re.compile(r"(\d)\.0*(?!\d)")
# Both give the same tokens on ASCII text; the first is about twice as fast.
_ASCII_TOKEN = re.compile(r"\n|[a-z0-9]+")
_TOKEN = re.compile(r"\n|[^\W_]+")
_NEWLINE = int.from_bytes(hashlib.blake2b(b"\n", digest_size=8).digest(), "little")

INVISIBLE = re.compile(
    "[\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160"
    "\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164"
    "\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)
"""Characters read as nothing: every format character (Cf) and the other
default-ignorable code points (variation selectors, Hangul fillers, U+034F): they draw
nothing, so a copy can hide them between the letters of every word."""
# Escapes, not the letters themselves: the point of these is that they cannot be told apart
# from the Latin ones on screen. Each line: capitals then small letters, by script.
_DRAWN_LIKE = {
    "a": "\u0410\u0430\u0391\u03b1\u0251",  # Cyrillic A a, Greek Alpha alpha, Latin alpha
    "b": "\u0412\u0392",  # Cyrillic Ve, Greek Beta
    "c": "\u0421\u0441\u03f9\u03f2",  # Cyrillic Es es, Greek lunate sigma (both cases)
    "d": "\u0500\u0501",  # Cyrillic Komi De de
    "e": "\u0415\u0435\u0395",  # Cyrillic Ie ie, Greek Epsilon
    "g": "\u0261",  # Latin script g
    "h": "\u041d\u04ba\u04bb\u0397\u0570",  # Cyrillic En, Shha shha, Greek Eta, Armenian ho
    "i": "\u0406\u0456\u0399\u03b9\u0131",  # Cyrillic I i (Ukrainian), Greek Iota iota, dotless i
    "j": "\u0408\u0458\u037f\u03f3\u0237",  # Cyrillic Je je, Greek Yot yot, dotless j
    "k": "\u041a\u043a\u039a\u03ba",  # Cyrillic Ka ka, Greek Kappa kappa
    "l": "\u04c0\u04cf",  # Cyrillic palochka (both cases)
    "m": "\u041c\u039c",  # Cyrillic Em, Greek Mu
    "n": "\u039d\u03b7\u0578",  # Greek Nu, Greek small eta, Armenian vo
    "o": "\u041e\u043e\u039f\u03bf\u0585",  # Cyrillic O o, Greek Omicron omicron, Armenian oh
    "p": "\u0420\u0440\u03a1\u03c1",  # Cyrillic Er er, Greek Rho rho
    "q": "\u051a\u051b\u0566",  # Cyrillic Qa qa, Armenian za
    "s": "\u0405\u0455",  # Cyrillic Dze dze
    "t": "\u0422\u03a4",  # Cyrillic Te, Greek Tau
    "u": "\u03c5\u057d",  # Greek small upsilon, Armenian seh
    "v": "\u0474\u0475\u03bd",  # Cyrillic Izhitsa izhitsa, Greek small nu
    "w": "\u051c\u051d",  # Cyrillic We we
    "x": "\u0425\u0445\u03a7\u03c7",  # Cyrillic Ha ha, Greek Chi chi
    "y": "\u0423\u0443\u04ae\u04af\u03a5\u03b3",  # Cyrillic U u, straight U u, Greek Upsilon, gamma
    "z": "\u0396",  # Greek Zeta
}
CONFUSABLES: dict[str, str] = {
    char: latin for latin, chars in _DRAWN_LIKE.items() for char in chars
}
"""Letter -> the ASCII letter it is drawn like (a compact stand-in for UTS #39's table). Case
matters: Greek capital Eta is drawn H, its small letter n."""
_CONFUSABLE_TABLE = str.maketrans(CONFUSABLES)
_CONFUSABLE = re.compile("[" + "".join(CONFUSABLES) + "]")
# A run of single characters (letters, digits, spaces), the same punctuation or symbol (or _)
# between each two, that is not part of a longer word at either end: p~a~r~i~s, W.h.a.t. .i.s
_UNIT = r"(?:[^\W_]|[ \t])"
_INTERLEAVED = re.compile(rf"(?<![^\W_]){_UNIT}([^\w\s]|_)(?:{_UNIT}\1)*{_UNIT}(?![^\W_])")


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
    if match[1] is not None:
        high, low = int(match[1], 16), int(match[2], 16)
        char = chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
    elif match[3] is not None:
        char = chr(int(match[3], 16))
    else:
        return " "
    if INVISIBLE.match(char):
        return ""  # dropped, as it is unescaped: a space would cut the word it hides in
    # NFKC may map the character to a letter or digit (a fullwidth one); never a newline:
    # line numbers must hold
    return char if unicodedata.normalize("NFKC", char).isalnum() else " "


def normalise(text: str) -> str:
    """Text as the tokeniser sees it: JSON escapes undone, compatibility forms, invisible
    characters and confusable letters folded (see the module docstring), lower case,
    interleaving separators removed, 5.0 as 5. Line ends are kept, one for one."""
    text = _ESCAPE.sub(_unescape, text)
    if not text.isascii():  # ASCII is NFKC already, and holds no invisible or confusable
        text = fold(text)
    return _ZERO_FRACTION.sub(r"\1", _collapse(text.lower()))


def fold(text: str) -> str:
    """``text`` in NFKC, its invisible characters dropped and its confusable letters made
    Latin (case kept): what :func:`normalise` does to non-ASCII text before lower case."""
    # confusables both sides of NFKC: it maps some (lunate sigma) to letters drawn otherwise
    # (final sigma), and makes others (a mathematical alpha becomes Greek alpha)
    text = _unconfuse(text)
    if not unicodedata.is_normalized("NFKC", text):
        text = _unconfuse(unicodedata.normalize("NFKC", text))
    return INVISIBLE.sub("", text)


def _unconfuse(text: str) -> str:
    return text.translate(_CONFUSABLE_TABLE) if _CONFUSABLE.search(text) else text


def _collapse(text: str) -> str:
    """``text`` with interleaving separators removed, line by line (see :func:`_line`).

    Only the lines that hold a *letter pair* (a lone letter, a separator, a lone letter or
    digit, or the other way round: ``x~y``, ``a~1``, not ``e-mail`` nor ``0,5``) are read:
    a line with a run of two letters or more whose removal joins anything holds one, almost
    surely (not ``a~ ~1~2~ ~b``). Finding the pairs is a few array operations; the regex, at
    some 100 ns a character, reads only those lines (a few in honest text, a CSV of numbers
    none, every one in an interleaved copy)."""
    lines = _paired_lines(text)
    if not lines:
        return text
    out, done = [], 0
    for start, end in lines:
        out += [text[done:start], _line(text[start:end])]
        done = end
    out.append(text[done:])
    return "".join(out)


def _line(line: str) -> str:
    """``line`` with the separator of each run removed when some run of the line with that
    separator holds two letters or more. A run of digits alone (``0,0,5,1`` in a CSV of
    pixels) is joined only beside such a run (``h~a~s 1~2``): numbers in a table keep the
    tokens the numeric items are indexed by."""
    runs = list(_INTERLEAVED.finditer(line))
    joining = {run[1] for run in runs if sum(map(str.isalpha, run[0])) >= 2}
    if not joining:
        return line
    out, done = [], 0
    for run in runs:
        if run[1] in joining:
            out += [line[done : run.start()], run[0].replace(run[1], "")]
            done = run.end()
    out.append(line[done:])
    return "".join(out)


def _paired_lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of each line of ``text`` that holds a letter pair (see
    :func:`_collapse`)."""
    alnum_table, alpha_table, sep_table = _classes()
    codes: npt.NDArray[np.uint8] | npt.NDArray[np.uint32]
    if text.isascii():
        codes = np.frombuffer(text.encode("ascii"), np.uint8)
        alnum, alpha, sep = alnum_table[codes], alpha_table[codes], sep_table[codes]
    else:
        codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), "<u4")
        low = np.minimum(codes, np.uint32(0xFFFF))
        alnum, alpha, sep = alnum_table[low], alpha_table[low], sep_table[low]
        for code in np.unique(codes[codes > 0xFFFF]).tolist():  # past the BMP: rare
            where, char = codes == code, chr(code)
            alnum[where], alpha[where], sep[where] = _classify(char)
    n = len(codes)
    a = np.concatenate([[False], alnum, [False, False, False]])  # a[i + 1] is character i's
    letter = np.concatenate([alpha, [False, False]])
    pair = a[1 : n + 1] & ~a[:n] & np.concatenate([sep[1:], [False]]) & a[3 : n + 3]
    pair &= ~a[4 : n + 4] & (letter[:n] | letter[2 : n + 2])
    at = np.flatnonzero(pair)
    if not len(at):
        return []
    ends = np.flatnonzero(codes == 10)
    lines = np.unique(np.searchsorted(ends, at))
    bounds = np.concatenate([[-1], ends, [n]])
    return [(int(bounds[k]) + 1, int(bounds[k + 1])) for k in lines.tolist()]


@cache
def _classes() -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """For each character of the BMP (built once, some 30 ms): :func:`_classify`."""
    classes = np.array([_classify(chr(code)) for code in range(0x10000)], dtype=np.bool_)
    return classes[:, 0].copy(), classes[:, 1].copy(), classes[:, 2].copy()


def _classify(char: str) -> tuple[bool, bool, bool]:
    """Whether ``char`` is a letter or digit (``[^\\W_]``, as the regexes read it), a letter,
    and a separator (neither of those nor white space: punctuation, a symbol, ``_``)."""
    return char.isalnum(), char.isalpha(), not (char.isalnum() or char.isspace())


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
