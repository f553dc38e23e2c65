"""Findings by relevance to a piece of work, with what superseded them and who adopted them.

Findings are lab-wide records, so every campaign on a task sees those of earlier and
parallel campaigns on it. Relevance is deliberately simple and explainable: shared tags weigh
most, then the checked metric, then shared words between the query text and the finding.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from rsilab.records import Adoption, Finding, FindingStatus
from rsilab.store.base import Store, StoreReader

TAG_WEIGHT = 3.0
METRIC_WEIGHT = 2.0
WORD_WEIGHT = 1.0

_WORD = re.compile(r"[a-z0-9_]+")
_STOP = frozenset(
    {
        *("the", "and", "for", "with", "from", "that", "this", "than", "then", "into", "onto"),
        *("over", "under", "was", "were", "are", "been", "has", "have", "had", "not", "but"),
        *("its", "our", "their", "more", "less", "when", "what", "which", "while", "does"),
    }
)


@dataclass(frozen=True)
class RankedFinding:
    """A finding as a query returns it.

    Attributes:
        finding: the stored finding.
        relevance: its score for the query (0 when nothing matched; higher is closer).
        superseded_by: ids of later findings that revise or refute it (oldest first).
    """

    finding: Finding
    relevance: float
    superseded_by: tuple[str, ...] = ()

    @property
    def superseded(self) -> bool:
        return bool(self.superseded_by)


def words(text: str) -> set[str]:
    """Lower-cased content words of ``text`` (three letters or more, no stop words)."""
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in _STOP}


def _norm_tags(tags: Iterable[str]) -> set[str]:
    return {t.strip().lower() for t in tags if t.strip()}


def relevance(
    finding: Finding,
    *,
    text: str | None = None,
    tags: Iterable[str] = (),
    metric: str | None = None,
) -> float:
    """How close ``finding`` is to the query: shared tags, same checked metric, shared words."""
    score = TAG_WEIGHT * len(_norm_tags(tags) & _norm_tags(finding.tags))
    if metric is not None and finding.structured is not None:
        score += METRIC_WEIGHT * (finding.structured.metric == metric)
    if text:
        own = f"{finding.claim} {finding.conditions} {' '.join(finding.tags)}"
        if finding.structured is not None:
            own += f" {finding.structured.metric}"
        score += WORD_WEIGHT * len(words(text) & words(own))
    return score


def lab_findings(store: StoreReader, task: str | None = None) -> list[Finding]:
    """The lab-wide findings, of ``task`` only when given, oldest first."""
    fields = None if task is None else {"task": task}
    return [f for f in store.query_as(Finding, fields=fields) if f.campaign_id is None]


def superseded_by(findings: Iterable[Finding]) -> dict[str, tuple[str, ...]]:
    """For each finding some other one supersedes: the ids of those, oldest first."""
    out: dict[str, list[str]] = {}
    for f in sorted(findings, key=lambda f: f.created_at):
        if f.supersedes is not None:
            out.setdefault(f.supersedes, []).append(f.id)
    return {k: tuple(v) for k, v in out.items()}


def relevant_findings(
    store: Store,
    task: str,
    *,
    text: str | None = None,
    tags: Iterable[str] = (),
    metric: str | None = None,
    statuses: Collection[FindingStatus] | None = None,
    limit: int = 20,
) -> list[RankedFinding]:
    """Findings of ``task`` ranked by relevance to the query, newest first on ties.

    Every finding of the task is ranked (none is hidden for scoring 0, so an open problem is
    never lost to a query's wording); ``statuses`` keeps only those with one of them. A
    finding another one supersedes is ranked after the others of the same relevance and
    carries the superseding ids.
    """
    every = lab_findings(store, task)
    later = superseded_by(every)
    tags = list(tags)
    ranked = [
        RankedFinding(f, relevance(f, text=text, tags=tags, metric=metric), later.get(f.id, ()))
        for f in every
        if statuses is None or f.status in statuses
    ]
    ranked.sort(key=lambda r: r.finding.created_at, reverse=True)
    ranked.sort(key=lambda r: (-r.relevance, r.superseded))  # stable: newest first on ties
    return ranked[:limit]


def adoptions_of(store: Store, finding_id: str) -> list[Adoption]:
    """Every recorded adoption of a finding, in any campaign, oldest first."""
    return store.query_as(Adoption, fields={"finding_id": finding_id})


def adoption_counts(store: StoreReader) -> Counter[str]:
    """How many recorded adoptions each finding has, in all campaigns, by finding id."""
    return Counter(a.finding_id for a in store.query_as(Adoption))
