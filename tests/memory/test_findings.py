"""Findings by relevance: tags, metric and words; only the task's lab-wide findings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rsilab.memory import adoption_counts, adoptions_of, lab_findings, relevant_findings
from rsilab.records import Adoption, EventDraft, Finding, FindingClaim, FindingStatus, Record
from rsilab.store import Lab, Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    lab = Lab.init(tmp_path / "lab")
    yield lab.store
    lab.close()


def _put(store: Store, *records: Record) -> None:
    store.commit(EventDraft(actor="tester", role="human", action="test_setup"), list(records))


def _finding(store: Store, claim: str, **extra: Any) -> Finding:
    values: dict[str, Any] = {"status": FindingStatus.SUPPORTED, "task": "digits", **extra}
    finding = Finding(claim=claim, **values)
    _put(store, finding)
    return finding


def _claim(metric: str) -> FindingClaim:
    return FindingClaim(metric=metric, a_ids=["exp-1"], b_ids=["exp-2"], direction="higher")


def _ids(store: Store, **query: Any) -> list[str]:
    return [r.finding.id for r in relevant_findings(store, "digits", **query)]


def test_tags_outrank_metric_and_metric_outranks_words(store: Store) -> None:
    by_words = _finding(store, "a smaller learning rate trains longer")
    by_metric = _finding(store, "something else", structured=_claim("accuracy"))
    by_tag = _finding(store, "another thing", tags=["Learning_Rate"])
    unrelated = _finding(store, "dropout does nothing", structured=_claim("loss"))
    ranked = relevant_findings(
        store, "digits", text="learning rate schedule", tags=["learning_rate"], metric="accuracy"
    )
    # two shared words ('learning', 'rate') weigh as much as the metric: the newer comes first
    assert [r.finding.id for r in ranked] == [by_tag.id, by_metric.id, by_words.id, unrelated.id]
    assert [r.relevance for r in ranked] == [3.0, 2.0, 2.0, 0.0]
    assert _ids(store, metric="accuracy")[0] == by_metric.id


def test_newer_first_on_ties_and_a_limit(store: Store) -> None:
    first, second, third = (_finding(store, f"claim {i}") for i in range(3))
    assert _ids(store) == [third.id, second.id, first.id]
    assert _ids(store, limit=2) == [third.id, second.id]


def test_only_lab_wide_findings_of_the_task(store: Store) -> None:
    mine = _finding(store, "digits claim")
    _finding(store, "iris claim", task="iris")
    _finding(store, "scoped claim", campaign_id="cmp-aaaaaaaaaaaa")
    assert _ids(store) == [mine.id]
    assert {f.task for f in lab_findings(store)} == {"digits", "iris"}


def test_status_filter(store: Store) -> None:
    _finding(store, "shown as a result")
    open_problem = _finding(store, "nobody knows why", status=FindingStatus.UNRESOLVED)
    assert _ids(store, statuses={FindingStatus.UNRESOLVED}) == [open_problem.id]


def test_a_superseded_finding_is_marked_and_ranked_after_its_equals(store: Store) -> None:
    old = _finding(store, "wider is better")
    new = _finding(store, "wider is better only with more data", supersedes=old.id)
    newest = _finding(store, "unrelated later claim")
    ranked = relevant_findings(store, "digits")
    by_id = {r.finding.id: r for r in ranked}
    assert by_id[old.id].superseded and by_id[old.id].superseded_by == (new.id,)
    assert not by_id[new.id].superseded
    assert [r.finding.id for r in ranked] == [newest.id, new.id, old.id]


def test_adoptions_of_a_finding_in_every_campaign(store: Store) -> None:
    finding = _finding(store, "wider is better")
    other = _finding(store, "other")
    adoptions = [
        Adoption(campaign_id=c, finding_id=finding.id, mode="adopted", actor="w")
        for c in ("cmp-aaaaaaaaaaaa", "cmp-bbbbbbbbbbbb")
    ]
    _put(store, *adoptions)
    assert [a.id for a in adoptions_of(store, finding.id)] == [a.id for a in adoptions]
    assert adoptions_of(store, other.id) == []
    counts = adoption_counts(store)
    assert (counts[finding.id], counts[other.id]) == (2, 0)
