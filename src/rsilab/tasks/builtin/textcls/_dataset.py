"""The two sample pools of ``textcls``, built on the host from the stdlib's own docstrings.

Both pools leave out the docstrings of :data:`~rsilab.tasks.builtin.textcls._excluded.EXCLUDED`
(keys: :func:`doc_key`) before any other rule: those a job can read elsewhere (in the runtime's
packages, C modules, libpython; see ``_exclusions_build``). The list is static, so the data does
not depend on whether a runtime is installed where the pools are built.

Classification (:func:`build_samples`): every docstring of a module in
:data:`~rsilab.tasks.builtin.textcls._families.FAMILIES`, cleaned (see ``_docstrings``), its
paragraphs joined by one space, cut at the last space before character 600, kept when at least
40 characters long; its label is its module's family. Then, in walk order:

- exact duplicates by normalised text (lower case, runs of non-alphanumerics as one space) keep
  the first; a normalised text found under two families is dropped everywhere (it is ambiguous);
- near duplicates are dropped: a text more than half of whose word 8-grams already occur in
  kept texts (this keeps boilerplate such as repeated "Return ..." docstrings of overloads out
  of the private tiers, so the overlap guard is not tripped by honest training);
- each family keeps its first :data:`PER_CLASS` texts in the order of the sha256 of their
  normalised text (a fixed, module-mixing order), so the classes are balanced (150: on
  CPython 3.11.7 the smallest family, ``files``, has 157 left after the exclusions).

Retrieval (:func:`build_retrieval_samples`): docstrings of :data:`RETRIEVAL_MODULES` (disjoint
from the families) with at least two paragraphs give a pair (first paragraph, the rest): the
query is 20-300 characters, the document at least 60 (cut at 600 like above). Pairs whose query
or document repeats an earlier one are dropped. Pairs are ordered by the sha256 of their
normalised texts and cut into groups of :data:`GROUP_SIZE`; a group is one sample, its documents
ordered by their own hash, its target the document index of each query. Grouping keeps every
text inside one sample, so the lab's split puts no text in two tiers.

Counts depend on the Python build (its stdlib is the data); :func:`pool_fingerprint` names it.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Sequence

from rsilab.tasks import Sample
from rsilab.tasks.builtin.textcls._docstrings import Doc, iter_docs
from rsilab.tasks.builtin.textcls._excluded import EXCLUDED
from rsilab.tasks.builtin.textcls._families import LABELS, MODULE_FAMILY, RETRIEVAL_MODULES

MIN_CHARS = 40
MAX_CHARS = 600
NGRAM = 8
PER_CLASS = 150
GROUP_SIZE = 16
QUERY_CHARS = (20, 300)
DOCUMENT_MIN_CHARS = 60

_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def normalise(text: str) -> str:
    """Lower case, runs of non-alphanumerics as one space, stripped: the dedup key."""
    return _NON_ALNUM.sub(" ", text.lower()).strip()


def cut(text: str, limit: int = MAX_CHARS) -> str:
    """``text`` itself when short enough, else cut at the last space before ``limit``."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    space = head.rfind(" ")
    return head[:space] if space > 0 else head


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def doc_key(doc: Doc) -> str:
    """sha256 hex of the docstring's whole text (paragraphs joined by one space), normalised:
    its key in :data:`EXCLUDED`. Docstrings of equal normalised text share a key."""
    return _digest(normalise(" ".join(doc.paragraphs)))


def not_excluded(docs: Iterable[Doc], excluded: Collection[str]) -> Iterator[Doc]:
    """``docs`` in order, less those whose :func:`doc_key` is in ``excluded``."""
    return (doc for doc in docs if doc_key(doc) not in excluded)


def _ngrams(key: str) -> set[tuple[str, ...]]:
    words = key.split()
    return {tuple(words[i : i + NGRAM]) for i in range(len(words) - NGRAM + 1)}


def _labelled(docs: Iterable[Doc]) -> list[tuple[str, str]]:
    """(text, family) in walk order, exact duplicates and ambiguous texts removed."""
    first: dict[str, tuple[str, str]] = {}
    families: dict[str, set[str]] = {}
    for doc in docs:
        text = cut(" ".join(doc.paragraphs))
        if len(text) < MIN_CHARS:
            continue
        key = normalise(text)
        family = MODULE_FAMILY[doc.top]
        families.setdefault(key, set()).add(family)
        first.setdefault(key, (text, family))
    return [value for key, value in first.items() if len(families[key]) == 1]


def drop_near_duplicates(texts: Sequence[str]) -> list[int]:
    """Indexes of ``texts`` kept, in order, by the 8-gram rule of the module docstring."""
    seen: set[tuple[str, ...]] = set()
    kept: list[int] = []
    for index, text in enumerate(texts):
        grams = _ngrams(normalise(text))
        if grams and len(grams & seen) * 2 > len(grams):
            continue
        seen |= grams
        kept.append(index)
    return kept


def build_samples(per_class: int = PER_CLASS, excluded: Collection[str] = EXCLUDED) -> list[Sample]:
    """The classification pool: ``{"text": str}`` inputs, family targets, sorted by id; no
    docstring whose key is in ``excluded`` contributes."""
    labelled = _labelled(not_excluded(iter_docs(MODULE_FAMILY), excluded))
    labelled = [labelled[i] for i in drop_near_duplicates([t for t, _ in labelled])]
    samples: list[Sample] = []
    for family in LABELS:
        texts = sorted((t for t, f in labelled if f == family), key=lambda t: _digest(normalise(t)))
        for text in texts[:per_class]:
            sid = f"cls-{_digest(normalise(text))[:16]}"
            samples.append(Sample(id=sid, input={"text": text}, target=family))
    return sorted(samples, key=lambda s: s.id)


def _pairs(docs: Iterable[Doc]) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for doc in docs:
        if len(doc.paragraphs) < 2:
            continue
        query, document = doc.paragraphs[0], cut(" ".join(doc.paragraphs[1:]))
        if not QUERY_CHARS[0] <= len(query) <= QUERY_CHARS[1]:
            continue
        if len(document) < DOCUMENT_MIN_CHARS:
            continue
        keys = (normalise(query), normalise(document))
        if seen.intersection(keys):
            continue
        seen.update(keys)
        pairs.append((query, document))
    return pairs


def _group(pairs: Sequence[tuple[str, str]]) -> Sample:
    queries = [q for q, _ in pairs]
    documents = sorted((d for _, d in pairs), key=lambda d: _digest(normalise(d)))
    answers = [documents.index(d) for _, d in pairs]
    sid = f"ret-{_digest(json.dumps(queries))[:16]}"
    return Sample(id=sid, input={"queries": queries, "documents": documents}, target=answers)


def build_retrieval_samples(
    group_size: int = GROUP_SIZE, excluded: Collection[str] = EXCLUDED
) -> list[Sample]:
    """The retrieval pool: groups of (queries, documents) with the answer key, sorted by id;
    no docstring whose key is in ``excluded`` contributes."""
    pairs = sorted(
        _pairs(not_excluded(iter_docs(RETRIEVAL_MODULES), excluded)),
        key=lambda p: _digest(normalise(p[0]) + "\n" + normalise(p[1])),
    )
    whole = len(pairs) - len(pairs) % group_size
    groups = [_group(pairs[i : i + group_size]) for i in range(0, whole, group_size)]
    return sorted(groups, key=lambda s: s.id)


def class_counts(samples: Iterable[Sample]) -> dict[str, int]:
    """Samples per label, labels sorted."""
    counts = Counter(str(s.target) for s in samples)
    return {label: counts[label] for label in sorted(counts)}


def pool_fingerprint(samples: Sequence[Sample]) -> str:
    """``python X.Y.Z sha256:<hex>`` over the samples' canonical JSON: names the data built."""
    data = json.dumps([s.model_dump(mode="json") for s in samples], sort_keys=True)
    version = ".".join(str(v) for v in sys.version_info[:3])
    return f"python {version} sha256:{_digest(data)}"
