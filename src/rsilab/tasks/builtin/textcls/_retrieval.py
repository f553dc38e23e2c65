"""The ``retrieval_mrr`` scorer: how well a system's embeddings pair queries with documents.

One sample is a group of queries and documents (see ``_dataset``); the output holds one
embedding per query and per document. Each query ranks every document of its group by cosine
similarity; the sample's score is the mean reciprocal rank of the right documents (1 when every
query ranks its own document first). Ties count against the query (the right document takes
the lowest place among equals), so constant embeddings score the minimum, not a lucky 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import JsonValue

from rsilab.tasks import Sample, Scored, register_scorer


class _Malformed(ValueError):
    pass


def _matrix(value: JsonValue, rows: int, what: str) -> list[list[float]]:
    if not isinstance(value, list) or len(value) != rows:
        raise _Malformed(f"{what}: expected {rows} embeddings")
    out: list[list[float]] = []
    for row in value:
        if not isinstance(row, list) or not row:
            raise _Malformed(f"{what}: an embedding is not a non-empty list")
        vector = [float(x) for x in row if isinstance(x, int | float) and not isinstance(x, bool)]
        if len(vector) != len(row) or not all(math.isfinite(x) for x in vector):
            raise _Malformed(f"{what}: an embedding holds a non-number")
        out.append(vector)
    if len({len(r) for r in out}) > 1:
        raise _Malformed(f"{what}: embeddings differ in length")
    return out


def _unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm > 0 else [0.0 for _ in vector]


def ranks(
    queries: Sequence[Sequence[float]], documents: Sequence[Sequence[float]], answers: Sequence[int]
) -> list[int]:
    """1-based rank of each query's right document by cosine similarity (ties: worst rank)."""
    units = [_unit(d) for d in documents]
    out = []
    for query, answer in zip(queries, answers, strict=True):
        q = _unit(query)
        sims = [sum(a * b for a, b in zip(q, d, strict=True)) for d in units]
        out.append(sum(1 for s in sims if s >= sims[answer]))
    return out


@register_scorer(
    "retrieval_mrr",
    description="Mean reciprocal rank of each query's document among its group, by cosine.",
)
def retrieval_mrr(sample: Sample, output: JsonValue) -> Scored:
    """Score one group; malformed output (wrong counts, lengths, non-numbers) is invalid."""
    data = sample.input
    answers = sample.target
    if not isinstance(data, dict) or not isinstance(answers, list):
        return Scored(sample.id, 0.0, False, "not a retrieval sample")
    if not isinstance(output, dict):
        return Scored(sample.id, 0.0, False, "output is not an object")
    queries, documents = data.get("queries"), data.get("documents")
    if not isinstance(queries, list) or not isinstance(documents, list):
        return Scored(sample.id, 0.0, False, "not a retrieval sample")
    try:
        q = _matrix(output.get("queries"), len(queries), "queries")
        d = _matrix(output.get("documents"), len(documents), "documents")
        if len(q[0]) != len(d[0]):
            raise _Malformed("query and document embeddings differ in length")
        found = ranks(q, d, [int(str(a)) for a in answers])
    except _Malformed as exc:
        return Scored(sample.id, 0.0, False, str(exc))
    mrr = sum(1.0 / r for r in found) / len(found)
    top1 = sum(1 for r in found if r == 1) / len(found)
    return Scored(sample.id, mrr, True, f"recall@1 {top1:.3f}")
