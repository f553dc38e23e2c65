"""Maintainer tool: find the ``textcls`` docstrings a job could read outside the stdlib source
(in the runtime's packages, C modules, libpython) and bake them into ``_excluded.py``. Never
run by the lab; rerun it (``--write``) when the runtime's requirements or the Python build
change::

    python -m rsilab.tasks.builtin.textcls._exclusions_build [--write] [ROOT ...]

ROOT (a folder or a file) defaults to :func:`default_roots`. The corpus is every regular file
under the roots that the in-sandbox leak probe would read (symlinks not followed, at most
:data:`MAX_BYTES`, gzip decompressed); a binary file (a NUL byte in its first 8 KiB) counts by
its runs of printable ASCII only. Every docstring of both pools' modules (before any dedup or
balancing, so the result does not hang on those rules) is then tested in two steps:

1. **Shingles.** Excluded when it shares a word 8-gram (words of ``normalise``: lower case,
   alphanumeric runs) with one corpus file; a docstring shorter than 8 words when its whole
   word sequence occurs in one.
2. **Probe needles.** Both pools are built without what is excluded so far, and every needle the
   probe could draw from any of their items (:func:`rsilab.tasks._probe.needles`: serialized
   items, 48-character middle slices) is searched for as the probe does (bytes, case-sensitive,
   any whitespace run matching any other). A docstring holding a needle found is excluded and
   this step repeats until none is found. A needle found that no docstring holds (a serialized
   item) is an error: excluding cannot fix it.

The file written lists the keys (``doc_key``) sorted, each with where the docstring is and
the first corpus file that repeats it, so one runtime and Python build always write the same
file.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import glob
import gzip
import itertools
import os
import re
import sys
import textwrap
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from rsilab.sandbox.runtime import current_runtime
from rsilab.tasks._probe import needles
from rsilab.tasks._samples import Sample
from rsilab.tasks.builtin.textcls._dataset import (
    MIN_CHARS,
    build_retrieval_samples,
    build_samples,
    class_counts,
    doc_key,
)
from rsilab.tasks.builtin.textcls._docstrings import Doc, iter_docs
from rsilab.tasks.builtin.textcls._families import MODULE_FAMILY, RETRIEVAL_MODULES

SHINGLE = 8
"""Words in a shingle."""

MAX_BYTES = 64 * 1024 * 1024
"""Files larger than this are skipped, as the probe skips them (``task check``'s max_bytes)."""

OUTPUT = Path(__file__).with_name("_excluded.py")

_PRINTABLE = re.compile(rb"[\t\n\r\x20-\x7e]{16,}")
_ALNUM = b"abcdefghijklmnopqrstuvwxyz0123456789"
_FOLD = bytes([b if b in _ALNUM else 32 for b in bytes(range(256)).lower()])
_Gram = tuple[bytes, ...]


@dataclass(frozen=True)
class CorpusFile:
    """One readable file: its path and its bytes (printable runs, for a binary), every run of
    whitespace made one space."""

    path: str
    text: bytes


@dataclass(frozen=True)
class Entry:
    """One excluded key: a docstring found in the corpus, and why."""

    where: str
    """``path:qualname`` of the first docstring with this key (walk order)."""
    found_in: str
    """The first corpus file that repeats it (the roots' walk order)."""
    step: str
    """``shingle``, ``text`` (a docstring shorter than a shingle) or ``needle``."""


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        data = handle.read(MAX_BYTES)
    if data[:2] == b"\x1f\x8b":
        with contextlib.suppress(OSError, EOFError, zlib.error):
            data = gzip.decompress(data)[:MAX_BYTES]
    if b"\0" in data[:8192]:
        data = b"\n".join(_PRINTABLE.findall(data))
    return b" ".join(data.split())


def _walk(root: Path) -> Iterator[str]:
    if root.is_file():
        yield str(root)
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            regular = not os.path.islink(path) and os.path.isfile(path)
            if regular and os.path.getsize(path) <= MAX_BYTES:
                yield path


def default_roots() -> list[Path]:
    """What a job sees of Python: the runtime venv (its packages and its stripped stdlib, whose
    C extensions and static libpython keep docstrings), the prefix of the Python it was made
    from less its stdlib folder (which the sandbox shows as the stripped copy) and a system
    libpython under ``/usr`` (symlinks left out: their targets are listed or hidden).

    Raises:
        RuntimeInstallError: the runtime is not installed.
    """
    runtime = current_runtime()
    base = runtime.base_prefix()
    found = [runtime.path, *(p for p in base.iterdir() if p.name != "lib")]
    found += (p for p in (base / "lib").iterdir() if not p.name.startswith("python3"))
    found += map(Path, glob.glob("/usr/lib/*/libpython3*") + glob.glob("/usr/lib/libpython3*"))
    return sorted(p for p in found if not p.is_symlink())


def read_corpus(roots: Iterable[Path]) -> list[CorpusFile]:
    """Every file of ``roots`` the probe would read, in walk order (folders and names sorted)."""
    return [CorpusFile(path, _read(path)) for root in roots for path in _walk(root)]


def words(text: bytes) -> list[bytes]:
    """``normalise``'s words, in bytes: ASCII letters lowered, every other byte a separator."""
    return text.translate(_FOLD).split()


def _grams(seq: Sequence[bytes], n: int) -> set[_Gram]:
    return set(zip(*(seq[i:] for i in range(n)), strict=False))


@dataclass(frozen=True)
class DocIndex:
    """Docstrings by key: the first of each key, its words, and every text with that key
    (docstrings whose texts differ only in case or punctuation share a key)."""

    first: dict[str, Doc]
    words: dict[str, list[bytes]]
    texts: dict[str, set[str]]

    @classmethod
    def of(cls, docs: Iterable[Doc]) -> DocIndex:
        first: dict[str, Doc] = {}
        texts: dict[str, set[str]] = {}
        for doc in docs:
            key = doc_key(doc)
            first.setdefault(key, doc)
            texts.setdefault(key, set()).add(" ".join(doc.paragraphs))
        found = {k: words(" ".join(d.paragraphs).encode()) for k, d in first.items()}
        return cls(first, found, texts)

    def entry(self, key: str, path: str, step: str) -> Entry:
        doc = self.first[key]
        return Entry(f"{doc.path}:{doc.qualname}", path, step)


def _short(docs: DocIndex) -> dict[bytes, list[tuple[str, bytes]]]:
    """Docstrings of fewer than :data:`SHINGLE` words that could be an item (at least
    ``MIN_CHARS`` long): (key, padded words) by their longest word, which a file must hold."""
    found: dict[bytes, list[tuple[str, bytes]]] = {}
    for key, seq in docs.words.items():
        if seq and len(seq) < SHINGLE and len(" ".join(docs.first[key].paragraphs)) >= MIN_CHARS:
            found.setdefault(max(seq, key=len), []).append((key, b" %s " % b" ".join(seq)))
    return found


def shingle_matches(docs: DocIndex, corpus: Sequence[CorpusFile]) -> dict[str, Entry]:
    """Step 1 of the module docstring: keys of docs repeated in the corpus, with the first file."""
    owners: dict[_Gram, list[str]] = {}
    for key, seq in docs.words.items():
        for gram in _grams(seq, SHINGLE):
            owners.setdefault(gram, []).append(key)
    grams = set(owners)
    short = _short(docs)
    found: dict[str, Entry] = {}
    for file in corpus:
        seq = words(file.text)
        for gram in _grams(seq, SHINGLE) & grams:
            for key in owners[gram]:
                found.setdefault(key, docs.entry(key, file.path, "shingle"))
        padded = b" %s " % b" ".join(seq)
        for anchor in short.keys() & set(seq):
            for key, text in short[anchor]:
                if key not in found and text in padded:
                    found[key] = docs.entry(key, file.path, "text")
    return found


def _needles(samples: Sequence[Sample]) -> tuple[dict[bytes, list[bytes]], list[bytes]]:
    """Squeezed needles of ``samples``: by their longest inner word (one the needle does not
    begin or end with, so a file holding the needle holds it whole), and those without one."""
    anchored: dict[bytes, list[bytes]] = {}
    loose: list[bytes] = []
    for _, text in needles(samples, "pool"):
        squeezed = b" ".join(text.encode().split())
        inner = squeezed.split(b" ")[1:-1]
        if inner:
            anchored.setdefault(max(inner, key=len), []).append(squeezed)
        elif squeezed:
            loose.append(squeezed)
    return anchored, loose


def needle_hits(samples: Sequence[Sample], corpus: Sequence[CorpusFile]) -> dict[bytes, str]:
    """Needles of ``samples`` (squeezed) found in the corpus, each with the first file holding
    it. An anchored needle is looked for in the files holding its anchor only; a loose one in
    all of them at once."""
    anchored, loose = _needles(samples)
    hits: dict[bytes, str] = {}
    for file in corpus:
        for anchor in anchored.keys() & set(file.text.split()):
            for needle in anchored[anchor]:
                if needle not in hits and needle in file.text:
                    hits[needle] = file.path
    if loose:
        whole = b"\0".join(file.text for file in corpus)
        starts = list(itertools.accumulate((len(f.text) + 1 for f in corpus), initial=0))
        for needle in loose:
            at = whole.find(needle)
            if at >= 0 and needle not in hits:
                hits[needle] = corpus[bisect.bisect_right(starts, at) - 1].path
    return hits


def _holders(needle: bytes, docs: DocIndex) -> list[str]:
    text = needle.decode()
    return [key for key, texts in docs.texts.items() if any(text in t for t in texts)]


def _pools(excluded: frozenset[str]) -> list[Sample]:
    return [*build_samples(excluded=excluded), *build_retrieval_samples(excluded=excluded)]


def needle_matches(
    docs: DocIndex,
    corpus: Sequence[CorpusFile],
    excluded: dict[str, Entry],
) -> dict[str, Entry]:
    """Step 2 of the module docstring: more keys, until no needle of the pools is found.

    Raises:
        RuntimeError: a needle found is held by no docstring (a serialized item).
    """
    found: dict[str, Entry] = {}
    while hits := needle_hits(_pools(frozenset(excluded) | frozenset(found)), corpus):
        for needle, path in sorted(hits.items()):
            keys = _holders(needle, docs)
            if not keys:
                raise RuntimeError(f"{needle[:80]!r} (in {path}) is no docstring's text")
            for key in keys:
                found.setdefault(key, docs.entry(key, path, "needle"))
    return found


def render(entries: dict[str, Entry], roots: Sequence[Path], files: int) -> str:
    """The text of ``_excluded.py``: keys sorted, one a line with its ``Entry`` as a comment."""
    version = ".".join(str(v) for v in sys.version_info[:3])
    about = (
        "Generated by ``python -m rsilab.tasks.builtin.textcls._exclusions_build --write``; "
        f"do not edit. From the docstrings of CPython {version} and {files} files under "
        f"{', '.join(_short_name(root) for root in roots)} (runtime packages: "
        f"{_packages(roots)})."
    )
    lines = [
        "# ruff: noqa: E501",
        '"""Docstrings ``textcls`` leaves out: what a job can read repeats them.',
        "",
        *textwrap.wrap(about, 96, break_on_hyphens=False),
        "",
        "Each key is a ``doc_key``; its comment names the docstring, the first file that repeats",
        "it and the step that found it (``shingle``, ``text`` or ``needle``).",
        '"""',
        "",
        "EXCLUDED: frozenset[str] = frozenset(",
        "    {",
    ]
    for key, entry in sorted(entries.items()):
        where = f"{entry.where} | {_shown(Path(entry.found_in), roots)} | {entry.step}"
        lines.append(f'        "{key}",  # {where}')
    lines += ["    }", ")", '"""Keys (``doc_key``) of the docstrings left out of both pools."""']
    return "\n".join(lines) + "\n"


def _short_name(root: Path) -> str:
    return "``{}``".format("/".join(root.parts[-2:]))


def _shown(path: Path, roots: Sequence[Path]) -> str:
    """``path`` from ``site-packages`` on when under it, else from the folder holding its root
    on; as given when under no root. So a listed path names no home folder."""
    root = next((r for r in roots if path == r or path.is_relative_to(r)), None)
    if root is None:
        return str(path)
    parts = path.relative_to(root.parent).parts
    if "site-packages" in parts:
        parts = parts[parts.index("site-packages") :]
    return "/".join(parts)


def _packages(roots: Sequence[Path]) -> str:
    sites = [str(p) for root in roots for p in root.glob("lib/python3*/site-packages")]
    found = {f"{d.metadata['Name']} {d.version}" for d in metadata.distributions(path=sites)}
    return ", ".join(sorted(found, key=str.lower)) or "none"


def main(argv: Sequence[str] | None = None) -> int:
    """Find, print a summary, and with ``--write`` rewrite ``_excluded.py``; exit status 0."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("roots", nargs="*", type=Path, help="what to read (default_roots)")
    parser.add_argument("--write", action="store_true", help=f"rewrite {OUTPUT.name}")
    args = parser.parse_args(argv)
    roots: list[Path] = args.roots or default_roots()
    corpus = read_corpus(roots)
    print(f"corpus: {len(corpus)} files, {sum(len(f.text) for f in corpus) / 1e6:.1f} MB")
    docs = DocIndex.of(iter_docs({*MODULE_FAMILY, *RETRIEVAL_MODULES}))
    entries = shingle_matches(docs, corpus)
    entries |= needle_matches(docs, corpus, entries)
    steps = {s: sum(1 for e in entries.values() if e.step == s) for s in ("shingle", "text")}
    steps["needle"] = len(entries) - sum(steps.values())
    print(f"docstrings: {len(docs.first)} distinct; excluded {len(entries)} {steps}")
    classes = build_samples(excluded=frozenset(entries))
    groups = build_retrieval_samples(excluded=frozenset(entries))
    print(f"classification: {len(classes)} {class_counts(classes)}; retrieval: {len(groups)}")
    if args.write:
        OUTPUT.write_text(render(entries, roots, len(corpus)), "utf-8")
        print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
