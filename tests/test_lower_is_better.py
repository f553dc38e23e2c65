"""Where scores are ranked, a lower-is-better benchmark ranks the lowest first.

No built-in task has a lower-is-better target, so each place that compares scores is tried
here on a small task of its own (synthetic with its target turned into an error to minimise)
and hand-made records; the controller's rule has its own tests in
``tests/controller/test_acceptance.py``, the built-in policy's in
``tests/orchestrator/builtin/test_state.py`` and the report's in
``tests/orchestrator/test_report.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from rsilab.controller import gc
from rsilab.orchestrator.builtin._context import RunContext
from rsilab.orchestrator.llm._team_prompts import roster_block
from rsilab.orchestrator.report import BenchmarkInfo
from rsilab.orchestrator.research.campaign_review import _Records
from rsilab.records import (
    BenchmarkDecision,
    Campaign,
    Candidate,
    CandidateState,
    DataTier,
    Direction,
    Evaluation,
    EventDraft,
    Experiment,
    ExperimentState,
    Interval,
    Metric,
    Record,
    TaskRef,
)
from rsilab.store import MemoryStore
from rsilab.tasks import Task, get_task
from rsilab.web import _campaign_pages
from rsilab.web._curves import BenchmarkCurve

CID = "cmp-aaaaaaaaaaaa"


@pytest.fixture
def task() -> Task:
    """synthetic, with its target an error to minimise."""
    synthetic = get_task("synthetic")
    quality, robustness = synthetic.benchmarks
    lower = quality.model_copy(update={"higher_is_better": False, "scorer": "squared_error"})
    return synthetic.model_copy(update={"benchmarks": [lower, robustness]})


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore(key=bytes(range(32)))


def _commit(store: MemoryStore, *records: Record) -> None:
    store.commit(EventDraft(actor="test", role="controller", action="seed"), list(records))


def _experiments(
    store: MemoryStore, scores: dict[str, list[float]], campaign_id: str = CID
) -> list[Experiment]:
    """One experiment per score, by researcher, each with a controller dev ``quality``."""
    direction = Direction(campaign_id=campaign_id, title="t", hypothesis="h")
    out = []
    for researcher, values in scores.items():
        for value in values:
            out.append(
                Experiment(
                    campaign_id=campaign_id,
                    direction_id=direction.id,
                    created_by=researcher,
                    state=ExperimentState.SUCCEEDED,
                    metrics=[Metric(name="quality", value=value, source="controller")],
                )
            )
    _commit(store, direction, *out)
    return out


def test_the_campaign_review_counts_a_drop_in_error_as_a_gain(
    store: MemoryStore, task: Task
) -> None:
    first, worse, better, best = _experiments(store, {"r1": [0.5, 0.7, 0.3, 0.1]})
    records = _Records.load(store, task, CID)
    assert records.new_bests == {better.id, best.id}
    assert records.gains[worse.id] == pytest.approx(-0.2)
    assert records.gains[best.id] == pytest.approx(0.4)
    assert records.gains[first.id] == 0.0


def test_the_leaders_roster_shows_the_lowest_error(store: MemoryStore, task: Task) -> None:
    _experiments(store, {"r1": [0.5, 0.2, 0.9], "r2": [0.4]})
    text = roster_block(store, CID, task, ["r1", "r2"])
    assert "r1: no orientation; 3 experiments; best dev quality 0.2000" in text
    assert "r2: no orientation; 1 experiments; best dev quality 0.4000" in text


def test_the_policy_weighs_lower_is_better_non_targets(task: Task) -> None:
    quality, robustness = task.benchmarks
    errors = [
        robustness.model_copy(update={"higher_is_better": False}),
        quality.model_copy(update={"target": False}),
    ]
    flipped = task.model_copy(update={"benchmarks": errors})
    unused: Any = None  # non_targets reads the task alone
    context = RunContext(unused, flipped, CID, unused, 0, unused, unused, unused)
    assert [(n.name, n.higher_is_better) for n in context.non_targets] == [
        ("robustness", False),
        ("quality", False),
    ]


def test_the_running_best_of_a_curve_follows_the_direction() -> None:
    points = [(1.0, 0.5), (2.0, 0.7), (3.0, 0.3), (4.0, 0.4)]
    lower = BenchmarkCurve("quality", higher_is_better=False).best_so_far(points)
    assert lower == [(1.0, 0.5), (2.0, 0.5), (3.0, 0.3), (4.0, 0.3)]
    higher = BenchmarkCurve("quality", higher_is_better=True).best_so_far(points)
    assert higher == [(1.0, 0.5), (2.0, 0.7), (3.0, 0.7), (4.0, 0.7)]


def test_the_campaign_list_shows_the_lowest_error(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    campaign = Campaign(task=TaskRef(name="err-task"))
    _commit(store, campaign)
    _experiments(store, {"r1": [0.5, 0.2, 0.9]}, campaign.id)
    infos = [BenchmarkInfo(name="quality", target=True, higher_is_better=False)]
    monkeypatch.setattr(_campaign_pages, "task_benchmarks", lambda name: infos)
    (row,) = _campaign_pages.campaign_rows(store)
    assert row.best_dev == {"quality": 0.2}


def _candidate(store: MemoryStore, task_name: str, metric: str, error: float) -> Candidate:
    evaluation = Evaluation(
        campaign_id=CID,
        benchmark="quality",
        tier=DataTier.FINAL,
        subject_id="ver-000000000000",
        metric=metric,
        aggregates={"avg@3": Interval(value=error, low=error, high=error)},
    )
    decision = BenchmarkDecision(
        benchmark="quality",
        target=True,
        gain=0.0,
        low=0.0,
        high=0.0,
        level=0.95,
        threshold=0.0,
        passed=False,
    )
    candidate = Candidate(
        campaign_id=CID,
        task=task_name,
        parent_version_id="ver-000000000000",
        harness_sha256="0" * 64,
        state=CandidateState.REJECTED,
        evaluation_ids=[evaluation.id],
        decisions=[decision],
    )
    _commit(store, evaluation, candidate)
    return candidate


def test_gc_keeps_the_candidate_with_the_lowest_error(
    store: MemoryStore, task: Task, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the task's own direction decides, even against the metric's usual one
    monkeypatch.setattr(gc, "load_ref", lambda ref: task)
    low, high = (_candidate(store, "synthetic", "accuracy", e) for e in (0.1, 0.9))
    assert gc._discarded_candidates(store, keep_top=1) == {high.id}
    assert low.id not in gc._discarded_candidates(store, keep_top=1)


def test_gc_reads_the_direction_off_the_scorer_for_a_task_file(store: MemoryStore) -> None:
    # a task loaded from a file is not known here: its scorer says lower is better
    high, _ = (_candidate(store, "from-a-file", "squared_error", e) for e in (0.9, 0.1))
    assert gc._discarded_candidates(store, keep_top=1) == {high.id}
