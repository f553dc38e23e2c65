"""The training-data overlap guard: private samples found in data a candidate could train on.

:class:`PrivateIndex` holds every private sample (accept and final tiers) of a task and
searches data for them in two ways:

- **exact**: the sha256 of a private input's canonical JSON (:func:`rsilab.tasks.content_hash`)
  equals that of a JSON value found in the data: the whole file or any line that parses as
  JSON, walked down to every nested value (dict keys too), so JSONL rows, bare inputs, lists of
  inputs and text-to-label tables are caught. A private input that is a string is also found as
  a whole line of plain text (stripped), or as the whole text.
- **near**: the private input's canonical text is cut into tokens (words, and numbers with
  integral decimals written as integers, lower case; JSON escapes undone, so a JSON copy and a
  plain copy read alike) and into ``shingle``-token windows. Windows that also occur in any
  benchmark's *public* tiers (train, dev) are dropped: they are not private-specific (rows of
  zeros in digit images, stock phrases), so training on the public tiers never trips the guard.
  A private sample is a near hit when at least ``share`` (by default half) of its
  private-specific windows, and at least three of them (all of them when it has fewer), occur
  in the data. Samples shorter than ``shingle`` tokens have one window, the whole token
  sequence. The content guard keeps a second index of 3-token windows over the benchmarks
  whose inputs are prose (``texts_only``), with a share of 0.3: a text with every fifth word
  replaced keeps about half of its 3-token windows and none of its 8-token ones.

- **scaled**: a private input that is a vector of numbers (a JSON list of at least
  ``_MIN_SCALED`` numbers, such as a digit image) is also kept normalised up to a positive
  scale: divided by its largest absolute value and rounded to ``1/_SCALE_LEVELS``. A JSON list
  found in the data with the same normalised values is a hit, so a copy with every value
  multiplied by a constant (pixels rescaled to 0-1) is caught though no byte or token is
  shared. Keys a public input also has are dropped, as windows are (none, on the built-in
  tasks: their splits hold no proportional pair).

- **text fields**: a structured input is also cut into windows, and looked for as a whole
  line, by each text field of three tokens or more (``MIN_LEAF_TOKENS``), so a copy of the
  question without its JSON keys is found.
- **generated benchmarks** (:mod:`rsilab.controller.chance`): where held-out public items are
  near hits by chance (shared templates, small pools of numbers), a near hit must hold a
  private-only token (a private entity) or be the private text verbatim; ``entity`` hits find
  a private item with its numbers changed, and :mod:`rsilab.controller.neighbours` counts
  items with their entity changed against the rate at which honest items coincide.

Binary files are scanned too (NUL bytes read as line ends, bad bytes as U+FFFD), so a leaked
file cannot hide behind one NUL byte. This index reads text as it is: opening containers and
compressed forms, reading binary serialisations and finding numeric near-duplicates (shifted,
noisy, permuted values) is :mod:`rsilab.controller.content`'s work, which calls it on every
layer it opens. Paraphrases are beyond it; weights are the provenance rule's business.
Symbolic links and other non-regular files are not followed.

Windows are kept as 64-bit hashes (a polynomial over 8-byte blake2b token digests), so the
index is small and a scan is linear in the data: one pass of regexes, then numpy.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import re
import stat
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np
import numpy.typing as npt
from pydantic import JsonValue

from rsilab.controller.chance import (
    CHANCE_RATE_MAX,
    EntityIndex,
    chance_rates,
    entity_mask,
    member,
    private_only_tokens,
)
from rsilab.controller.chance import window_hashes as _window_hashes
from rsilab.controller.neighbours import NeighbourIndex, Sequences
from rsilab.controller.tokens import (
    canonical_text,
    leaves,
    strings,
    token_hashes,
    token_list,
    token_stream,
)
from rsilab.records import DataTier
from rsilab.tasks import TIERS, Sample, Splits, Task, content_hash, make_splits, public_draws

__all__ = ["OverlapHit", "PrivateIndex"]

_Hashes = npt.NDArray[np.uint64]

_MIN_SCALED = 8  # shorter vectors are too often proportional by chance
_MAX_WHOLE_TOKENS = 64  # sequences checked whole: items, not documents
# A power of two: for integer data k/m with m <= 128 (pixels 0-16), k/m * 256 is never a
# half-integer, so a rescaled copy's float error cannot flip a rounding and miss the key.
_SCALE_LEVELS = 256
PUBLIC_DRAWS = 4
"""Extra draws of a generated benchmark's public tiers read as public vocabulary (a private
entity is a token no public item holds, in the lab's draw or in these)."""
_FILTER_BITS = 20  # a 1 MiB bitmap per width of window hashes rules out almost every window cheaply
_MAX_DEPTH = 64  # bounds the re-serialising of nested candidates; inputs sit far shallower
_JSON_START = frozenset('{["-0123456789')
_NOT_JSON = object()
# content_hash's json.dumps arguments; one encoder, as dumps builds a new one per call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
# Private ids are re-keyed with the lab secret (rsilab.tasks._splits), so one found anywhere
# can only have come from a leak: outputs keyed on leaked ids are caught even when the inputs
# were left behind. Every tier's ids have this one form; only the private ones are looked up.
_SAMPLE_ID = re.compile(r"(?<![0-9a-z])s-[0-9a-f]{12}(?![0-9a-f])")


@dataclass(frozen=True)
class OverlapHit:
    """One private sample found in scanned data."""

    benchmark: str
    """Name of the benchmark the private sample belongs to."""
    tier: DataTier
    """``DataTier.ACCEPT`` or ``DataTier.FINAL``."""
    sample_id: str
    """The private sample's (re-keyed) id."""
    kind: Literal["exact", "scaled", "near", "numeric", "entity"]
    """``exact``: its input's canonical JSON (or text line); ``scaled``: its numeric input
    multiplied by a constant; ``near``: shared token windows; ``numeric``: a row of a numeric
    table passed the ratio test of :mod:`rsilab.controller.numeric`; ``entity``: aligned on a
    private-only token of the sample (a private entity's name), all of it but its numbers is
    reproduced (:class:`~rsilab.controller.chance.EntityIndex`)."""
    where: str
    """Path relative to the scanned root (or the name given to scan_bytes), with ``:LINE``
    when the line is known (JSON lines, text lines, the first shared window of a near hit)."""
    share: float
    """1.0 for exact and scaled hits; for near hits the share of the sample's private-specific
    windows found; for entity hits the share of its positions reproduced; for numeric
    hits one minus the ratio of distances."""


class _Ref(NamedTuple):
    benchmark: str
    tier: DataTier
    sample_id: str


class PrivateIndex:
    """Index of every private (accept+final) sample of a task, for overlap search.

    Build it with :meth:`build`. It holds hashes of the private inputs, their string inputs
    verbatim (for the plain-text line check) and 64-bit window hashes; it never writes them
    anywhere. Scans are read-only and deterministic: hits come sorted by benchmark, tier,
    sample id, place and kind, one per (sample, kind, place).
    """

    def __init__(self, shingle: int, share: float = 0.5) -> None:
        """An empty index; use :meth:`build`."""
        self._shingle = shingle
        self._share = share
        self._refs: list[_Ref] = []
        self._exact: dict[str, list[_Ref]] = defaultdict(list)
        self._scaled: dict[bytes, list[_Ref]] = defaultdict(list)
        self._shapes: set[tuple[type, int]] = set()
        self._walked: set[type] = {dict, list}
        self._texts: dict[str, list[_Ref]] = defaultdict(list)
        self._ids: dict[str, _Ref] = {}
        self._windows: dict[int, dict[int, list[int]]] = {}
        self._sorted_keys: dict[int, _Hashes] = {}
        self._filters: dict[int, npt.NDArray[np.bool_]] = {}
        self._totals: list[int] = []
        self._entity: list[frozenset[int]] = []
        self._chance: dict[str, float] = {}
        self._templated: frozenset[str] = frozenset()
        self._redrawn: frozenset[str] = frozenset()
        self._whole: defaultdict[int, defaultdict[int, list[int]]] = defaultdict(
            lambda: defaultdict(list)
        )
        """Each short private sequence's hash as one window of its own length: found, it is
        in the data verbatim (checked for templated benchmarks only)."""
        self._whole_cache: tuple[frozenset[str] | None, dict[int, _Hashes]] = (None, {})
        self._entities = EntityIndex([], [], frozenset())
        self._texts_of: list[bool] = []
        """Per sequence: whether it is a text (a text field, or an input that is a text)."""
        self._neighbours = NeighbourIndex(Sequences(), Sequences())

    @property
    def chance_rates(self) -> dict[str, float]:
        """Per benchmark, how often a held-out public item is a near hit by chance
        (:mod:`rsilab.controller.chance`); above ``CHANCE_RATE_MAX`` a benchmark is templated
        and its near hits must hold a private entity."""
        return dict(self._chance)

    @property
    def templated(self) -> frozenset[str]:
        """The benchmarks whose near hits must hold a private entity, or all of a private
        sequence's specific windows (see chance_rates)."""
        return self._templated

    def treat_as_templated(self, names: Iterable[str]) -> None:
        """Count ``names`` as templated too (another index, with narrower windows, saw them
        match by chance where this one's 400-odd public items could not show it)."""
        self._templated = self._templated | frozenset(names)

    @classmethod
    def build(
        cls,
        task: Task,
        secret: bytes,
        *,
        shingle: int = 8,
        share: float = 0.5,
        texts_only: bool = False,
    ) -> PrivateIndex:
        """Index the accept and final tiers of every benchmark of ``task`` under ``secret``.

        The public tiers (train, dev) of every benchmark are read to drop the windows they
        share with private samples.

        Raises:
            ValueError: ``shingle`` is below 1.
            rsilab.tasks.SplitError: a benchmark's samples cannot be read or split.
        """
        if shingle < 1:
            raise ValueError(f"shingle must be at least 1, not {shingle}")
        index = cls(shingle, share)
        public: dict[str, list[JsonValue]] = defaultdict(list)
        private: list[JsonValue] = []
        scaled_public: set[bytes] = set()
        leaves_public: set[str] = set()
        vocabulary: list[JsonValue] = []
        for bench in task.benchmarks:
            splits = make_splits(task, bench, secret)
            if texts_only and not _holds_text(splits):
                continue
            vocabulary += [s.input for s in public_draws(task, bench, PUBLIC_DRAWS)]
            for tier in TIERS:
                if not tier.is_private:
                    inputs = [s.input for s in splits[tier]]
                    public[bench.name].extend(inputs)
                    scaled_public.update(filter(None, map(_scaled_key, inputs)))
                    leaves_public.update(leaf.strip() for i in inputs for leaf in leaves(i))
                    continue
                for sample in splits[tier]:
                    private.extend(index._add_private(_Ref(bench.name, tier, sample.id), sample))
        for key in scaled_public:
            index._scaled.pop(key, None)
        for leaf in leaves_public:
            index._texts.pop(leaf, None)
        index._index_windows(private, public, vocabulary)
        return index

    def _add_private(self, ref: _Ref, sample: Sample) -> list[JsonValue]:
        """Index ``sample`` by hash, id, text and scale; the sequences to cut into windows:
        its input, then each text field of it long enough to be an item on its own (a copy
        of the question without its JSON keys), each numbered as a sequence of ``ref``."""
        self._exact[content_hash(sample)].append(ref)
        self._ids[sample.id] = ref
        self._shapes.add(_shape(sample.input))
        self._walked.add(type(sample.input))
        if isinstance(sample.input, str) and sample.input.strip():
            self._texts[sample.input.strip()].append(ref)
        if (key := _scaled_key(sample.input)) is not None:
            self._scaled[key].append(ref)
        sequences: list[JsonValue] = [sample.input, *leaves(sample.input)]
        for leaf in sequences[1:]:
            self._texts[str(leaf).strip()].append(ref)
        self._refs.extend([ref] * len(sequences))
        self._texts_of += [isinstance(sample.input, str)] + [True] * (len(sequences) - 1)
        return sequences

    def _index_windows(
        self,
        private: Sequence[JsonValue],
        public: Mapping[str, Sequence[JsonValue]],
        vocabulary: Sequence[JsonValue] = (),
    ) -> None:
        """Cut private sequences into windows; keep the private-specific ones (in no public
        input), which of them hold a private entity (a token in no public input and not in
        ``vocabulary``, more public inputs), and each benchmark's chance rate."""
        tokens = [token_list(canonical_text(value)) for value in private]
        public_tokens = {b: [token_list(canonical_text(v)) for v in vs] for b, vs in public.items()}
        seen_public = [t for ts in public_tokens.values() for t in ts]
        seen_public += [token_list(canonical_text(v)) for v in vocabulary]
        entity = private_only_tokens(tokens, seen_public)
        hashes = [token_hashes(t) for t in tokens]
        widths = {min(len(h), self._shingle) for h in hashes if len(h)}
        public_windows = {
            bench: [{w: np.unique(_window_hashes(token_hashes(t), w)) for w in widths} for t in ts]
            for bench, ts in public_tokens.items()
        }
        seen: dict[int, set[int]] = {width: set() for width in widths}
        for item in (item for items in public_windows.values() for item in items):
            for width, found in item.items():
                seen[width].update(found.tolist())
        self._windows = {width: defaultdict(list) for width in widths}
        every: dict[int, defaultdict[int, list[int]]] = {w: defaultdict(list) for w in widths}
        for number, (sample_tokens, sample_hashes) in enumerate(zip(tokens, hashes, strict=True)):
            width = min(len(sample_hashes), self._shingle)
            if width == 0:
                self._totals.append(0)
                self._entity.append(frozenset())
                continue
            windows = _window_hashes(sample_hashes, width).tolist()
            marks = entity_mask(np.array([t in entity for t in sample_tokens]), width).tolist()
            keys = set(windows) - seen[width]
            for key in keys:
                self._windows[width][key].append(number)
            for key in set(windows):
                every[width][key].append(number)
            self._totals.append(len(keys))
            self._entity.append(frozenset(k for k, m in zip(windows, marks, strict=True) if m))
        self._neighbours = self._neighbour_index(tokens, hashes, public, entity)
        entity_hashes = frozenset(token_hashes(sorted(entity)).tolist())
        numbers = [np.array([t.isdigit() for t in ts], dtype=np.bool_) for ts in tokens]
        self._entities = EntityIndex(hashes, numbers, entity_hashes)
        for number, sample_hashes in enumerate(hashes):
            if self._texts_of[number] and 0 < len(sample_hashes) <= _MAX_WHOLE_TOKENS:
                whole = int(_window_hashes(sample_hashes, len(sample_hashes))[0])
                self._whole[len(sample_hashes)][whole].append(number)
        rates = chance_rates(public_windows, every, self._totals, self._share)
        self._chance = {bench: near for bench, (near, _) in rates.items()}
        self._templated = frozenset(b for b, r in self._chance.items() if r > CHANCE_RATE_MAX)
        self._redrawn = frozenset(b for b, (_, full) in rates.items() if full > CHANCE_RATE_MAX)
        self._windows = {width: table for width, table in self._windows.items() if table}
        for width, table in self._windows.items():
            ordered = np.array(sorted(table), dtype=np.uint64)
            bitmap = np.zeros(1 << _FILTER_BITS, dtype=np.bool_)
            bitmap[ordered >> np.uint64(64 - _FILTER_BITS)] = True
            self._sorted_keys[width] = ordered
            self._filters[width] = bitmap

    def _neighbour_index(
        self,
        tokens: Sequence[Sequence[str]],
        hashes: Sequence[_Hashes],
        public: Mapping[str, Sequence[JsonValue]],
        entity: frozenset[str],
    ) -> NeighbourIndex:
        """Skeletons of every tier text (see :mod:`rsilab.controller.neighbours`): a private
        text's slot is its private-only tokens, a public text's its public-only ones."""
        private = Sequences()
        for number, (sample_tokens, sample_hashes) in enumerate(zip(tokens, hashes, strict=True)):
            if self._texts_of[number]:
                slots = np.array([t in entity for t in sample_tokens], dtype=np.bool_)
                private.add(self._refs[number].benchmark, sample_hashes, slots)
        texts = {
            bench: [
                token_list(t) for v in values for t in ([v] if isinstance(v, str) else leaves(v))
            ]
            for bench, values in public.items()
        }
        mentioned = {t for sample_tokens in tokens for t in sample_tokens}
        others = Sequences()
        for bench, sequences in texts.items():
            for sample_tokens in sequences:
                only = [t not in mentioned and any(c.isalpha() for c in t) for t in sample_tokens]
                others.add(bench, token_hashes(sample_tokens), np.array(only, dtype=np.bool_))
        return NeighbourIndex(private, others)

    @property
    def neighbour_rates(self) -> dict[str, tuple[float, float]]:
        """Per benchmark: how often a public text has a private neighbour (its entity
        changed), and ``q`` (see :mod:`rsilab.controller.neighbours`)."""
        return dict(self._neighbours.rates)

    def neighbours(self, data: bytes) -> dict[str, dict[int, bool]]:
        """The tier items' neighbours in ``data``, for the templated benchmarks: per
        benchmark, each distinct run's hash -> whether it neighbours a private item."""
        text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
        return self._neighbours.observe(token_stream(text)[0], self._templated)

    def scan_bytes(self, data: bytes, where: str) -> list[OverlapHit]:
        """Every private sample found in ``data``, which ``where`` names in the hits.

        Bytes that are not UTF-8 are read as U+FFFD; nothing is skipped as binary here.
        """
        findings = _Findings()
        text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
        self._scan_chunk(text, 0, findings, whole=True)
        return sorted(self._hits(findings, where), key=_order)

    def scan_near(self, data: bytes, where: str) -> list[OverlapHit]:
        """The near hits alone of :meth:`scan_bytes` (for an index kept for its windows)."""
        if not self._sorted_keys:
            return []
        findings = _Findings()
        text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
        for number, key, line in self._shared_windows(*token_stream(text)):
            findings.shared[number].add(key)
            findings.first_line[number] = min(findings.first_line.get(number, line), line)
        return sorted(self._hits(findings, where), key=_order)

    def scan_tree(self, root: Path, *, max_file_bytes: int = 64 << 20) -> list[OverlapHit]:
        """Every private sample found in the regular files under ``root``.

        Binary files are scanned like text; symbolic links are not followed.
        A file is read ``max_file_bytes`` at a time, cut at line ends, so memory stays bounded
        and every byte is still scanned; near hits add up over a file's chunks, but the
        whole-file JSON parse applies only to a file that fits in one chunk, and token windows
        that straddle two chunks are not seen.

        Raises:
            ValueError: ``max_file_bytes`` is below 1.
            OSError: ``root`` is not a folder, or a folder or file under it cannot be read; the
                guard fails closed, since what it could not read it could not check.
        """
        if max_file_bytes < 1:
            raise ValueError(f"max_file_bytes must be at least 1, not {max_file_bytes}")
        if not root.is_dir():
            raise NotADirectoryError(f"{root}: not a folder")
        hits: list[OverlapHit] = []
        for path in _regular_files(root):
            findings = self._scan_file(path, max_file_bytes)
            hits.extend(self._hits(findings, path.relative_to(root).as_posix()))
        return sorted(hits, key=_order)

    def _scan_file(self, path: Path, chunk: int) -> _Findings:
        """What the file holds (NUL bytes read as line ends, other bad bytes as U+FFFD)."""
        # Binary files are read too, with undecodable bytes as U+FFFD: a leaked JSONL file
        # with one NUL byte in front must not pass as "binary". Compressed or encrypted data
        # does pass; only the weights rule and re-training from recorded inputs bound that.
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        findings = _Findings()
        carry, offset, first = "", 0, True
        with path.open("rb") as stream:
            while True:
                data = stream.read(chunk)
                last = len(data) < chunk
                if first:
                    text = decoder.decode(data.replace(b"\0", b"\n"), final=last)
                    text = text.removeprefix("\ufeff")
                else:
                    text = carry + decoder.decode(data.replace(b"\0", b"\n"), final=last)
                if not last and (cut := text.rfind("\n") + 1):
                    text, carry = text[:cut], text[cut:]
                else:
                    carry = ""
                self._scan_chunk(text, offset, findings, whole=first and last)
                offset += text.count("\n")
                first = False
                if last:
                    return findings

    def _scan_chunk(self, text: str, offset: int, findings: _Findings, *, whole: bool) -> None:
        """Add to ``findings`` what ``text`` (starting after line ``offset``) holds."""
        for ref, line, kind in self._exact_matches(text, offset, whole=whole):
            findings.exact.setdefault((ref, line), kind)
        first = findings.first_line
        hashes, line_of = token_stream(text)
        for number, key, line in self._shared_windows(hashes, line_of):
            findings.shared[number].add(key)
            first[number] = min(first.get(number, offset + line), offset + line)
        for number, (line, share) in self._entities.find(hashes, line_of).items():
            findings.entity.setdefault(number, (offset + line, share))
        findings.whole.update(self._verbatim(hashes))

    def _verbatim(self, hashes: _Hashes) -> set[int]:
        """The templated benchmarks' private sequences found whole, in one run of tokens."""
        found: set[int] = set()
        for width, keys in self._whole_keys().items():
            windows = _window_hashes(hashes, width)
            for key in set(windows[member(windows, keys)].tolist()):
                found.update(self._whole[width][key])
        return found

    def _whole_keys(self) -> dict[int, _Hashes]:
        """Per width, the sorted whole-sequence hashes of the templated benchmarks (cached)."""
        if self._whole_cache[0] != self._templated:
            keys = {
                width: np.array(
                    sorted(k for k, ns in table.items()
                           if any(self._refs[n].benchmark in self._templated for n in ns)),
                    dtype=np.uint64,
                )
                for width, table in self._whole.items()
            }  # fmt: skip
            self._whole_cache = (self._templated, {w: k for w, k in keys.items() if len(k)})
        return self._whole_cache[1]

    def _hits(self, findings: _Findings, where: str) -> list[OverlapHit]:
        """Exact hits, then near hits of the samples not found exactly in the same place."""
        hits = [
            OverlapHit(*ref, kind=kind, where=_place(where, line), share=1.0)
            for (ref, line), kind in findings.exact.items()
        ]
        exact = {ref for ref, _ in findings.exact}
        near: dict[tuple[_Ref, str], float] = {}
        for number, keys in findings.shared.items():
            total, ref = self._totals[number], self._refs[number]
            if ref in exact or len(keys) < self._share * total or len(keys) < min(3, total):
                continue
            verbatim = number in findings.whole and ref.benchmark not in self._redrawn
            named = not keys.isdisjoint(self._entity[number])
            if ref.benchmark in self._templated and not (verbatim or named):
                continue  # template, numbers and objects alone: honest items match so
            place = _place(where, findings.first_line[number])
            near[ref, place] = max(near.get((ref, place), 0.0), len(keys) / total)
        hits += [OverlapHit(*ref, kind="near", where=p, share=v) for (ref, p), v in near.items()]
        found = {ref for ref, _ in near} | exact
        entity: dict[tuple[_Ref, str], float] = {}
        for number, (line, share) in findings.entity.items():
            if (ref := self._refs[number]) not in found:
                place = _place(where, line)
                entity[ref, place] = max(entity.get((ref, place), 0.0), share)
        hits += [OverlapHit(*r, kind="entity", where=p, share=v) for (r, p), v in entity.items()]
        return hits

    def _exact_matches(
        self, text: str, offset: int, *, whole: bool
    ) -> Iterator[tuple[_Ref, int | None, Literal["exact", "scaled"]]]:
        parsed = _parse(text) if whole else _NOT_JSON
        if parsed is not _NOT_JSON:
            yield from ((ref, None, kind) for ref, kind in self._json_matches(parsed))
        lines = text.split("\n")
        for number, line in enumerate(lines, offset + 1):
            stripped = line.strip()
            if not stripped:
                continue
            yield from ((ref, number, "exact") for ref in self._texts.get(stripped, ()))
            for found in _SAMPLE_ID.findall(stripped):
                if found in self._ids:
                    yield self._ids[found], number, "exact"
            if parsed is _NOT_JSON and stripped[0] in _JSON_START:
                value = _parse(stripped)
                if value is not _NOT_JSON:
                    yield from ((ref, number, kind) for ref, kind in self._json_matches(value))
        if whole and len(lines) > 1:
            yield from ((ref, None, "exact") for ref in self._texts.get(text.strip(), ()))

    def _json_matches(self, value: Any) -> Iterator[tuple[_Ref, Literal["exact", "scaled"]]]:
        stack: list[tuple[Any, int]] = [(value, 0)]
        walked = self._walked
        while stack:
            item, depth = stack.pop()
            if _shape(item) in self._shapes:
                exact = self._exact.get(_json_hash(item), ())
                yield from ((ref, "exact") for ref in exact)
                # an exact copy is also a copy at scale 1: report it once, as exact
                if not exact and self._scaled and isinstance(item, list):
                    key = _scaled_key(item)
                    if key is not None:
                        yield from ((ref, "scaled") for ref in self._scaled.get(key, ()))
            if depth >= _MAX_DEPTH:
                continue
            # Children that can neither match nor hold a match (the numbers of a digit image,
            # when no private input is a number) are not pushed: most of a walk's cost.
            children = item.values() if isinstance(item, dict) else item
            if isinstance(item, dict) and str in walked:
                stack.extend((key, depth + 1) for key in item)
            if isinstance(item, dict | list) and not walked.isdisjoint(map(type, children)):
                stack.extend((c, depth + 1) for c in children if type(c) in walked)

    def _shared_windows(
        self, hashes: _Hashes, line_of: npt.NDArray[np.int64]
    ) -> Iterator[tuple[int, int, int]]:
        """(sample number, window hash, line of its first occurrence) for each private-specific
        window of a sample that occurs in a token stream (:func:`token_stream`)."""
        if not self._sorted_keys:
            return
        for width, keys in self._sorted_keys.items():
            windows = _window_hashes(hashes, width)
            maybe = np.flatnonzero(self._filters[width][windows >> np.uint64(64 - _FILTER_BITS)])
            slots = np.minimum(np.searchsorted(keys, windows[maybe]), len(keys) - 1)
            positions = maybe[keys[slots] == windows[maybe]]
            matched, at = np.unique(windows[positions], return_index=True)
            lines = line_of[positions[at]].tolist()
            for key, line in zip(matched.tolist(), lines, strict=True):
                yield from ((number, key, line) for number in self._windows[width][key])


@dataclass
class _Findings:
    """What one file or blob holds, gathered over its chunks."""

    exact: dict[tuple[_Ref, int | None], Literal["exact", "scaled"]] = field(default_factory=dict)
    """Whole-value matches by (sample, line): exact or scaled (the first kind found)."""
    shared: defaultdict[int, set[int]] = field(default_factory=lambda: defaultdict(set))
    first_line: dict[int, int] = field(default_factory=dict)
    whole: set[int] = field(default_factory=set)
    """Sequences found verbatim (see ``PrivateIndex._verbatim``)."""
    entity: dict[int, tuple[int, float]] = field(default_factory=dict)
    """Entity hits: sequence number -> (line, share of its tokens)."""


def _holds_text(splits: Splits) -> bool:
    """Whether most of a benchmark's inputs hold prose (a string of at least 8 words)."""
    samples = [s for tier in TIERS for s in splits[tier]]
    with_text = sum(1 for s in samples if any(len(t.split()) >= 8 for t in strings(s.input)))
    return 2 * with_text > len(samples)


def _place(where: str, line: int | None) -> str:
    return where if line is None else f"{where}:{line}"


def _order(hit: OverlapHit) -> tuple[str, str, str, str, str]:
    return hit.benchmark, hit.tier.value, hit.sample_id, hit.where, hit.kind


def _shape(value: Any) -> tuple[type, int]:
    """A cheap key that equal JSON values share, so only plausible candidates get hashed."""
    return type(value), len(value) if isinstance(value, str | list | dict) else 0


def _scaled_key(value: Any) -> bytes | None:
    """``value`` normalised up to a positive scale, as a key; None unless it is a list of at
    least ``_MIN_SCALED`` finite numbers (not booleans), not all zero.

    Dividing by the largest absolute value makes ``c * v`` and ``v`` alike for every ``c > 0``;
    rounding to ``_SCALE_LEVELS`` levels absorbs the float error of the multiplication.
    """
    if not isinstance(value, list) or len(value) < _MIN_SCALED:
        return None
    if not all(type(v) is int or type(v) is float for v in value):
        return None
    try:
        vector = np.array(value, dtype=np.float64)
    except OverflowError:  # an int beyond float range: not a measurement anyone scaled
        return None
    if not np.isfinite(vector).all():
        return None
    peak = float(np.abs(vector).max())
    if peak == 0.0:
        return None
    levels = np.rint(vector / peak * _SCALE_LEVELS).astype(np.int16)
    return levels.tobytes()


def _json_hash(value: Any) -> str:
    """The hash :func:`rsilab.tasks.content_hash` gives a sample whose input is ``value``."""
    return hashlib.sha256(_CANONICAL.encode(value).encode("utf-8")).hexdigest()


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _NOT_JSON


def _regular_files(root: Path) -> Iterator[Path]:
    """Regular files under ``root`` in sorted order; links are not followed; errors raise."""

    def fail(error: OSError) -> None:
        raise error

    for folder, dirs, files in os.walk(root, onerror=fail):
        dirs.sort()
        for name in sorted(files):
            path = Path(folder, name)
            if stat.S_ISREG(path.lstat().st_mode):
                yield path
