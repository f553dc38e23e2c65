"""The built-in policy's view of a campaign: runs weighed against the non-targets, and which
runs progress counts as done."""

from __future__ import annotations

from rsilab.orchestrator.builtin._state import (
    NON_TARGET_MARGIN,
    NON_TARGET_PENALTY,
    CampaignView,
    NonTarget,
    Run,
    _weighed,
)
from rsilab.orchestrator.research.dag import ResearchDag


def _run(index: int, quality: float, robustness: float) -> Run:
    scores = {"quality": quality, "robustness": robustness}
    return Run(index, f"exp-{index}", "dir-1", {}, quality, scores=scores)


def test_a_run_loses_score_for_a_non_target_beyond_its_margin_against_the_reference() -> None:
    guard = NonTarget("robustness", tolerance=0.02)
    ref, fine, fragile = _run(1, 0.5, 0.70), _run(2, 0.6, 0.695), _run(3, 0.7, 0.64)
    weighed = _weighed([ref, fine, fragile], ["exp-1"], [guard])
    assert [r.score for r in weighed[:2]] == [0.5, 0.6]  # within the margin: untouched
    shortfall = (0.70 - NON_TARGET_MARGIN * 0.02) - 0.64
    assert abs(weighed[2].score - (0.7 - NON_TARGET_PENALTY * shortfall)) < 1e-9
    assert weighed[2].score < ref.score  # so it is never proposed over the reference


def test_lower_is_better_non_targets_and_runs_without_scores() -> None:
    latency = NonTarget("latency", tolerance=1.0, higher_is_better=False)
    ref = Run(1, "exp-1", "d", {}, 0.5, scores={"latency": 10.0})
    slower = Run(2, "exp-2", "d", {}, 0.6, scores={"latency": 12.0})
    unknown = Run(3, "exp-3", "d", {}, 0.7)
    weighed = _weighed([ref, slower, unknown], ["exp-1"], [latency])
    assert weighed[1].score < 0.6 and weighed[2].score == 0.7


def test_a_recorded_run_whose_thread_has_not_returned_is_not_yet_settled() -> None:
    runs = [_run(n, 0.5, 0.7) for n in (1, 2, 4)]
    view = CampaignView(ResearchDag("camp-1", {}, []), runs, ["exp-1"], 0.5)
    assert view.settled(set()) == 3
    assert view.settled({2, 3}) == 2  # 2 is recorded but in flight; 3 is not recorded yet
