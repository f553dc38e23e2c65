"""BERT's uncased WordPiece tokenizer, from ``vocab.txt`` alone (no tokenizer library).

Same steps as the reference BertTokenizer of all-MiniLM-L6-v2 (``do_lower_case``, accents
stripped, Chinese characters split, punctuation split, greedy longest-match WordPiece with
``##`` continuations, words over 100 characters as ``[UNK]``).
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

_CJK = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
_MAX_WORD = 100


def _is_punctuation(char: str) -> bool:
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _normalise(text: str) -> str:
    """Drop control characters, map whitespace to spaces, pad CJK, lower case, strip accents."""
    out: list[str] = []
    for char in text:
        cp = ord(char)
        if char in " \t\n\r" or unicodedata.category(char) == "Zs":
            out.append(" ")
        elif cp == 0 or cp == 0xFFFD or unicodedata.category(char).startswith("C"):
            continue
        elif any(lo <= cp <= hi for lo, hi in _CJK):
            out.append(f" {char} ")
        else:
            out.append(char)
    decomposed = unicodedata.normalize("NFD", "".join(out).lower())
    return "".join(c for c in decomposed if unicodedata.category(c) != "Mn")


def _split_punctuation(word: str) -> list[str]:
    pieces: list[str] = []
    current = ""
    for char in word:
        if _is_punctuation(char):
            if current:
                pieces.append(current)
            pieces.append(char)
            current = ""
        else:
            current += char
    if current:
        pieces.append(current)
    return pieces


class WordPiece:
    """Text to token ids, ``[CLS] ... [SEP]``, truncated to a maximum length."""

    def __init__(self, vocab_file: Path) -> None:
        tokens = vocab_file.read_text("utf-8").splitlines()
        self.vocab = {token: index for index, token in enumerate(tokens)}
        self.unk = self.vocab["[UNK]"]
        self.cls = self.vocab["[CLS]"]
        self.sep = self.vocab["[SEP]"]
        self.pad = self.vocab["[PAD]"]
        self._cache: dict[str, list[int]] = {}

    def _word_ids(self, word: str) -> list[int]:
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        ids: list[int] = []
        start = 0
        while start < len(word) and len(word) <= _MAX_WORD:
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    ids.append(self.vocab[piece])
                    break
                end -= 1
            if end == start:
                ids = []
                break
            start = end
        result = ids or [self.unk]
        self._cache[word] = result
        return result

    def tokenize(self, text: str) -> list[int]:
        """Ids of the WordPiece tokens of ``text``, without special tokens."""
        ids: list[int] = []
        for word in _normalise(text).split():
            for piece in _split_punctuation(word):
                ids.extend(self._word_ids(piece))
        return ids

    def encode(self, text: str, max_length: int) -> list[int]:
        """``[CLS] tokens [SEP]``, tokens cut so the whole is at most ``max_length`` ids."""
        return [self.cls, *self.tokenize(text)[: max_length - 2], self.sep]
