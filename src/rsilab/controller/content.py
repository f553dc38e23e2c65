"""The content guard: private items, or the task's raw sources, in what a candidate trains on.

:class:`ContentIndex` joins the detectors, for one task under one secret:

- the declared raw sources (``Task.data_sources``), opened: the sha256 of each file and of
  every layer and member inside it (a ``digits.csv.gz`` and the CSV it holds). A file of the
  candidate's data, or anything inside it, with one of those hashes is a *copy* of a source;
- :class:`~rsilab.controller.overlap.PrivateIndex`: exact inputs, their ids, rescaled vectors
  and 8-token-window near-duplicates, in text; and a second one of 3-token windows over the
  benchmarks whose inputs are prose (:data:`TEXT_SHINGLE`, :data:`TEXT_SHARE`), so that a text
  with words replaced, dropped or re-cased throughout is still found;
- one :class:`~rsilab.controller.numeric.NumericReference` per benchmark whose inputs are
  numeric vectors: near-duplicate rows under affine maps, noise, column order and subsets.

:meth:`ContentIndex.scan` opens every file (containers and compressed forms, nested, and
base64 or hex text decoded, within :class:`~rsilab.controller.unpack.Caps`), reads every
serialisation the built-in tasks and common tools use (:mod:`rsilab.controller.readers`:
JSON, JSON Lines, CSV and other delimited text, pickle read without running it, npy, npz and
safetensors, each told by its bytes, not its name), reads a binary in none of those forms as
bare numbers in rows of a numeric benchmark's width (:mod:`rsilab.controller.raw`; past
``Caps.raw_bytes`` it is refused), and runs each detector on what it finds. Every numeric
table is also matched transposed when its shape allows.

A :class:`ContentReport` *leaks* when a source is copied, when any private item is found
exactly (its canonical input, its id, or a text input as a whole line), or when the items
found approximately (near, scaled, numeric, entity) of one benchmark reach that benchmark's
:attr:`ContentIndex.min_hits`: one approximate match can be chance, a copy of the private
data is many; or when :data:`ENTITY_MIN_HITS` items of one benchmark are found by their
private entities (:mod:`rsilab.controller.chance`: names no public item has, which honest data
never holds). On generated (templated) benchmarks, near hits need a private entity too.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import stat
from collections import defaultdict
from collections.abc import Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from rsilab.controller import raw
from rsilab.controller.neighbours import excess, is_leak
from rsilab.controller.numeric import MIN_COLUMNS, MIN_ROWS, NumericReference
from rsilab.controller.overlap import OverlapHit, PrivateIndex
from rsilab.controller.readers import Parsed, plain_json, read
from rsilab.controller.unpack import Caps, Opener, Uncheckable
from rsilab.records import DataTier
from rsilab.tasks import TIERS, Task, make_splits

__all__ = [
    "ENTITY_MIN_HITS",
    "MIN_HITS",
    "ContentIndex",
    "ContentReport",
    "Uncheckable",
    "regular_files",
]

MIN_HITS = 10
"""Private items found approximately that make a leak, at most (see :func:`min_hits`)."""
TEXT_SHINGLE = 3
TEXT_SHARE = 0.3
"""The prose layer: a private text is a near hit when 30% of its private-specific 3-token
windows occur in the data (set on generated prose: every fifth word replaced is found, public
texts edited, spliced or with words dropped never are)."""
_PIECE = 32 << 20  # text scanned at a time
_MIN_SOURCE_BYTES = 256  # a smaller file (an empty __init__.py) is no evidence of a copy
_PATH = re.compile(r"""["'](/[^"'\s\\]{1,1024})["']""")


ENTITY_MIN_HITS = 2
"""Private items of one benchmark found by their private entities (``entity`` hits: a private
name with half the item's words) that make a leak: data built from the public tiers holds no
private-only token at all, so two such items are not chance; one may be (a name reused)."""


def min_hits(private_items: int) -> int:
    """Approximate hits that make a leak for a benchmark with ``private_items``: 5% of them,
    at least 2 and at most :data:`MIN_HITS`."""
    return max(2, min(MIN_HITS, math.ceil(0.05 * private_items)))


@dataclass
class _Bench:
    name: str
    reference: NumericReference
    refs: list[tuple[DataTier, str]]  # (tier, id) of each reference row; public ones unused


@dataclass
class ContentReport:
    """What a scan found."""

    hits: list[OverlapHit] = field(default_factory=list)
    """Private items found, one per (item, kind, place)."""
    copies: list[tuple[str, str]] = field(default_factory=list)
    """(place, declared source) for each copy of a raw source."""
    min_hits: dict[str, int] = field(default_factory=dict)
    """Approximate hits that make a leak, per benchmark."""
    neighbours: defaultdict[str, dict[int, bool]] = field(default_factory=lambda: defaultdict(dict))
    """Per templated benchmark, each distinct run of the data that neighbours a tier item (its
    entity changed) -> whether the item is private (:mod:`rsilab.controller.neighbours`)."""
    neighbour_q: dict[str, float] = field(default_factory=dict)
    """Per benchmark, the chance that an honest neighbour's item is private."""

    def excess(self) -> dict[str, tuple[int, int, float]]:
        """Per benchmark with neighbours: (private ones m, all n, P(Binomial(n, q) >= m))."""
        return {
            bench: excess(runs, self.neighbour_q.get(bench, 1.0))
            for bench, runs in self.neighbours.items()
        }

    def approximate(self) -> dict[str, int]:
        """Distinct private items found only approximately, per benchmark."""
        exact = {(h.benchmark, h.sample_id) for h in self.hits if h.kind == "exact"}
        found: dict[str, set[str]] = defaultdict(set)
        for h in self.hits:
            if h.kind != "exact" and (h.benchmark, h.sample_id) not in exact:
                found[h.benchmark].add(h.sample_id)
        return {name: len(ids) for name, ids in found.items()}

    def by_entity(self) -> dict[str, int]:
        """Distinct private items found by an entity hit, per benchmark."""
        found: dict[str, set[str]] = defaultdict(set)
        for h in self.hits:
            if h.kind == "entity":
                found[h.benchmark].add(h.sample_id)
        return {name: len(ids) for name, ids in found.items()}

    def leaks(self) -> bool:
        """Whether the data holds private items or a source (see the module docstring)."""
        if self.copies or any(h.kind == "exact" for h in self.hits):
            return True
        if any(n >= ENTITY_MIN_HITS for n in self.by_entity().values()):
            return True
        if any(is_leak(m, p) for m, _, p in self.excess().values()):
            return True
        return any(n >= self.min_hits.get(b, MIN_HITS) for b, n in self.approximate().items())

    def detail(self) -> str:
        """One line for people: what was found where (never a private value)."""
        parts = []
        if self.copies:
            where = ", ".join(sorted({f"{w} (= {s})" for w, s in self.copies})[:3])
            parts.append(f"a copy of the task's declared data source: {where}")
        if self.hits:
            exact = {(h.benchmark, h.sample_id) for h in self.hits if h.kind == "exact"}
            places = sorted({h.where.split(":")[0] for h in self.hits})[:5]
            samples = len({(h.benchmark, h.sample_id) for h in self.hits})
            parts.append(
                f"{samples} private samples ({len(exact)} exact, {samples - len(exact)} "
                f"approximate matches) found in {', '.join(places)}"
            )
        for bench, (m, n, p) in sorted(self.excess().items()):
            if is_leak(m, p):
                parts.append(
                    f"{bench}: {m} of {n} items that equal a tier item but for its entity "
                    f"match private ones (P = {p:.1g} by chance)"
                )
        return "; ".join(parts)


class ContentIndex:
    """Everything the content guard compares a candidate's data with, for one task."""

    def __init__(
        self,
        private: PrivateIndex,
        prose: PrivateIndex,
        numeric: Sequence[_Bench],
        sources: dict[str, str],
        minimum: dict[str, int],
        shipped: frozenset[str] = frozenset(),
    ) -> None:
        """Use :meth:`build`."""
        self.private = private
        self.prose = prose
        self.numeric = list(numeric)
        self.sources = sources
        self.min_hits = minimum
        self.shipped = shipped
        """sha256 of the task's own harness files (not read as bare numbers)."""
        widths = {b.reference.width for b in self.numeric}
        self.raw_widths = frozenset(widths | {w + 1 for w in widths})
        """Row widths a file of bare numbers is read in: an item's, and one more (a label)."""

    @classmethod
    def build(
        cls, task: Task, secret: bytes, *, private: PrivateIndex | None = None
    ) -> ContentIndex:
        """The index of ``task`` under ``secret`` (``private``: a PrivateIndex already built).

        Raises:
            rsilab.tasks.SplitError: a benchmark's samples cannot be read or split.
            OSError: a declared source cannot be read.
            Uncheckable: a declared source passes the caps.
        """
        private = private or PrivateIndex.build(task, secret)
        benches, minimum = [], {}
        for bench in task.benchmarks:
            splits = make_splits(task, bench, secret)
            minimum[bench.name] = min_hits(sum(len(splits[t]) for t in TIERS if t.is_private))
            numeric = _numeric_bench(bench.name, splits)
            if numeric is not None:
                benches.append(numeric)
        prose = PrivateIndex.build(
            task, secret, shingle=TEXT_SHINGLE, share=TEXT_SHARE, texts_only=True
        )
        # a benchmark generated from templates is so in both layers; the 3-token one shows it
        private.treat_as_templated(prose.templated)
        shipped = {_sha(p.read_bytes()) for p in regular_files(task.harness)}
        sources = _source_hashes(task.data_sources, shipped)
        return cls(private, prose, benches, sources, minimum, frozenset(shipped))

    def scan(
        self,
        files: Iterable[tuple[str, Path]],
        caps: Caps | None = None,
        *,
        known: Container[str] = frozenset(),
    ) -> ContentReport:
        """What the regular files ``files`` ((place, path) pairs) hold.

        ``known``: sha256 of files a recorded job produced (weights); like the task's own
        harness files they are read in every known form but not as bare numbers.

        Raises:
            Uncheckable: a cap is passed or a container cannot be opened.
            OSError: a file cannot be read.
        """
        opener = Opener(caps)
        rates = self.private.neighbour_rates
        report = ContentReport(
            min_hits=dict(self.min_hits), neighbour_q={b: q for b, (_, q) in rates.items()}
        )
        small: dict[int, list[tuple[str, npt.NDArray[np.float64]]]] = defaultdict(list)
        for where, path in files:
            opener.count(where, path.stat().st_size)
            data = path.read_bytes()
            trusted = (digest := _sha(data)) in self.shipped or digest in known
            for node in opener.nodes(where, data):
                parsed = self._node(node.where, node.data, node.container, report, small, opener)
                if parsed is not None and not trusted:
                    self._raw(node.where, node.data, parsed, report, opener)
        for pooled in small.values():
            table = np.vstack([t for _, t in pooled])
            place = ", ".join(sorted({w for w, _ in pooled})[:3])
            report.hits.extend(self._numeric(table, f"{place} (pooled)"))
        return report

    def _node(
        self,
        where: str,
        data: bytes,
        container: bool,
        report: ContentReport,
        small: dict[int, list[tuple[str, npt.NDArray[np.float64]]]],
        opener: Opener,
    ) -> Parsed | None:
        """Run the detectors on one node; what was read from it (None for a container)."""
        if len(data) >= _MIN_SOURCE_BYTES and (source := self.sources.get(_sha(data))):
            report.copies.append((where, source))
        if container:
            return None
        report.hits.extend(self._text(data, where, report))
        parsed = read(where, data)
        if parsed.binary:
            text = plain_json(parsed.values).encode()
            opener.count(where, len(text))
            report.hits.extend(self._text(text, where, report))
        for table in parsed.tables:
            if len(table) < MIN_ROWS:
                small[table.shape[1]].append((where, table))
            else:
                report.hits.extend(self._numeric(table, where))
        return parsed

    def _raw(
        self, where: str, data: bytes, parsed: Parsed, report: ContentReport, opener: Opener
    ) -> None:
        """``data`` read as bare numbers (see :mod:`rsilab.controller.raw`) when it is a
        binary in no known form whose size fits rows of a numeric benchmark.

        Raises:
            Uncheckable: such a file is larger than ``opener.caps.raw_bytes``.
        """
        if parsed.values or parsed.tables or not self.raw_widths:
            return
        if not raw.is_binary(data) or not raw.may_hold_rows(len(data), self.raw_widths):
            return
        if len(data) > opener.caps.raw_bytes:
            raise Uncheckable(
                where,
                f"a binary of {len(data)} bytes in no known form, which may be bare numbers, "
                f"past the cap of {opener.caps.raw_bytes} bytes the guard reads as rows",
            )
        for label, table in raw.interpretations(data, self.raw_widths):
            report.hits.extend(self._numeric(table, f"{where} (as {label})", raw.EXPLAINED))

    def _text(self, data: bytes, where: str, report: ContentReport) -> list[OverlapHit]:
        hits = []
        for piece in _pieces(data):  # bounded memory: a token list is many times its text
            hits += self.private.scan_bytes(piece, where) + self.prose.scan_near(piece, where)
            for bench, runs in self.private.neighbours(piece).items():
                report.neighbours[bench].update(runs)
        return hits

    def _numeric(
        self, table: npt.NDArray[np.float64], where: str, explained: float = 0.0
    ) -> list[OverlapHit]:
        if table.shape[1] < MIN_COLUMNS:
            return []
        hits = []
        for bench in self.numeric:
            for hit in bench.reference.match(table, explained=explained):
                tier, sample_id = bench.refs[hit.item]
                share = round(1.0 - hit.ratio, 3)
                hits.append(OverlapHit(bench.name, tier, sample_id, "numeric", where, share))
        return hits


def _pieces(data: bytes, size: int = _PIECE) -> Iterator[bytes]:
    """``data`` cut at line ends into pieces of about ``size`` bytes (whole when smaller)."""
    start = 0
    while start < len(data):
        end = len(data) if len(data) - start <= size else data.rfind(b"\n", start, start + size)
        end = start + size if end <= start else end + 1
        yield data[start:end]
        start = end


def regular_files(root: Path) -> Iterator[Path]:
    """Regular files under ``root`` in sorted order; links are not followed; errors raise."""

    def fail(error: OSError) -> None:
        raise error

    for folder, dirs, files in os.walk(root, onerror=fail):
        dirs.sort()
        for name in sorted(files):
            path = Path(folder, name)
            if stat.S_ISREG(path.lstat().st_mode):
                yield path


def named_paths(root: Path, limit: int = 200) -> list[Path]:
    """Existing regular files outside ``root`` that text files under it name by absolute
    path (what a recipe may read besides its tree), at most ``limit``."""
    found: dict[Path, None] = {}
    inside = root.resolve()
    for path in regular_files(root):
        if path.stat().st_size > 4 << 20:
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        for match in _PATH.finditer(text):
            named = Path(match[1])
            if named.parts[1:2] in (("proc",), ("sys",), ("dev",)):
                continue  # the kernel's views, not data (and a job sees its own)
            try:
                if named.resolve().is_relative_to(inside) or not named.is_file():
                    continue
                if stat.S_ISREG(named.stat().st_mode):
                    found.setdefault(named)
            except (OSError, ValueError):
                continue
            if len(found) >= limit:
                return list(found)
    return list(found)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _source_hashes(sources: Sequence[Path], shipped: set[str]) -> dict[str, str]:
    """sha256 -> source name, for every declared source file and everything inside it."""
    opener = Opener(Caps(total_bytes=4 << 30, ratio=1e9, members=1_000_000))
    hashes: dict[str, str] = {}
    for source in sources:
        paths = list(regular_files(source)) if source.is_dir() else [source]
        for path in paths:
            if not path.is_file():
                continue
            for node in opener.nodes(path.name, path.read_bytes()):
                digest = _sha(node.data)
                if len(node.data) >= _MIN_SOURCE_BYTES and digest not in shipped:
                    hashes.setdefault(digest, str(path))
    return hashes


def _vector(value: Any) -> list[float] | None:
    """A sample input as a flat vector of numbers (a list, nested lists, or the numeric
    leaves of a dict in key order), or None."""
    if isinstance(value, dict):
        flat: list[float] = []
        for key in sorted(value):
            part = _vector(value[key]) if isinstance(value[key], list | dict) else None
            item = value[key]
            if part is not None:
                flat.extend(part)
            elif isinstance(item, int | float) and not isinstance(item, bool):
                flat.append(float(item))
        return flat
    if isinstance(value, list):
        try:
            array = np.array(value, dtype=np.float64)
        except (ValueError, TypeError, OverflowError):
            return None
        return array.ravel().tolist() if np.isfinite(array).all() else None
    return None


def _numeric_bench(name: str, splits: dict[DataTier, list[Any]]) -> _Bench | None:
    """The numeric reference of one benchmark, or None when its inputs are not vectors of at
    least :data:`MIN_COLUMNS` numbers of one length."""
    vectors, private, refs = [], [], []
    for tier in TIERS:
        for sample in splits[tier]:
            vector = _vector(sample.input)
            if vector is None or len(vector) < MIN_COLUMNS:
                continue
            vectors.append(vector)
            private.append(tier.is_private)
            refs.append((tier, sample.id))
    lengths = {len(v) for v in vectors}
    if len(lengths) != 1:
        return None
    reference = NumericReference(np.array(vectors), np.array(private, dtype=bool))
    return _Bench(name, reference, refs) if reference.usable else None
