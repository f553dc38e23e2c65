"""The Reviewer's acceptance prediction: the power of the controller's sequential test on the
dev evidence. Campaigns run on the generated tuning family (not a benchmark task): a clearly
better config is proposed and accepted, a flat task gives nothing to propose."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from pydantic import JsonValue

from rsilab.orchestrator.builtin.reviewer import _agent as reviewer_agent
from rsilab.orchestrator.builtin.reviewer._predict import (
    Prediction,
    acceptance_probability,
    estimate,
    estimate_paired,
)
from rsilab.orchestrator.builtin.runner import run_campaign
from rsilab.records import Candidate, CandidateState, DataTier, Intent, Recommendation
from rsilab.store import Lab
from rsilab.tasks import Benchmark, Budget, FileSplits
from tests.orchestrator.builtin.tuning_tasks import tuning_task


@pytest.fixture(autouse=True)
def _process_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")


def _bench(name: str, tmp_path: Path, *, target: bool, tolerance: float = 0.0) -> Benchmark:
    files = {t: tmp_path / f"{t}.jsonl" for t in DataTier}
    return Benchmark(
        name=name,
        scorer="accuracy",
        target=target,
        higher_is_better=True,
        tolerance=tolerance,
        samples=FileSplits(files=files),
    )


def test_the_estimate_separates_seed_noise_from_the_per_sample_term() -> None:
    found = estimate([[1.0, 2.0], [3.0, 4.0]], [[0.0, 1.0], [2.0, 3.0]])
    # run means 1.5, 3.5 and 0.5, 2.5: squares 2 + 2 over 2 df; per-sample gains 1, 1: no spread
    assert found.gain == pytest.approx(1.0)
    assert found.seed_sd == pytest.approx(math.sqrt(2.0))
    assert found.sample_var == pytest.approx(0.0)
    assert found.gain_var == pytest.approx(2.0 * (1 / 2 + 1 / 2))


def test_an_arm_of_one_run_is_not_estimated() -> None:
    with pytest.raises(ValueError, match="needs >= 2 runs"):
        estimate([[1.0, 2.0]], [[0.0, 1.0], [2.0, 3.0]])


def test_a_clear_gain_is_likely_accepted_and_no_gain_is_not(tmp_path: Path) -> None:
    target = [_bench("acc", tmp_path, target=True)]
    rng = np.random.default_rng(0)
    noise = 0.01 * rng.standard_normal((3, 20))
    clear = estimate(0.7 + noise, 0.5 + noise[::-1])
    nothing = estimate(0.5 + noise, 0.5 + noise[::-1])
    high, _ = acceptance_probability({"acc": clear}, target, proposal_index=1, seed=1)
    low, _ = acceptance_probability({"acc": nothing}, target, proposal_index=1, seed=1)
    assert high > 0.9
    assert low < 0.5
    again, _ = acceptance_probability({"acc": nothing}, target, proposal_index=1, seed=1)
    assert again == low  # the same seed, the same prediction


def test_paired_by_seed_a_config_that_changes_nothing_is_never_proposed(tmp_path: Path) -> None:
    """Two seeds whose shared randomness (few-shot draws, say) moves every score: a config that
    changes nothing scores exactly what the reference does on each seed. Paired, its gain and
    every spread are 0 and no simulated comparison accepts it; drawn as independent arms, the
    seeds' difference (+0.05 here) reads as a gain that is often accepted."""
    target = [_bench("acc", tmp_path, target=True)]
    rng = np.random.default_rng(4)
    seeds = np.array([[0.55], [0.45]]) + 0.02 * rng.standard_normal((2, 30))
    ref = seeds
    inert = seeds.copy()
    paired = estimate_paired(inert, ref)
    assert (paired.gain, paired.gain_var, paired.diff_sd) == (0.0, 0.0, 0.0)
    p_paired, _ = acceptance_probability({"acc": paired}, target, proposal_index=1, seed=5)
    assert p_paired == 0.0
    swapped = estimate(inert[::-1], ref)  # the same rows read as other seeds' runs
    assert swapped.gain == pytest.approx(0.0)
    lucky = estimate(inert + np.array([[0.1], [0.0]]), ref)  # one seed's draw was kinder
    p_unpaired, _ = acceptance_probability({"acc": lucky}, target, proposal_index=1, seed=5)
    assert p_unpaired > 0.2


def test_pairing_removes_the_seed_noise_both_configs_share(tmp_path: Path) -> None:
    """A real gain of 0.04 under seed noise of sd 0.08 that both configs share: the paired
    estimate sees the gain on every seed and predicts acceptance; independent arms see two
    seeds' spread and do not."""
    target = [_bench("acc", tmp_path, target=True)]
    rng = np.random.default_rng(6)
    shared = 0.5 + 0.08 * rng.standard_normal((3, 1)) + 0.01 * rng.standard_normal((3, 40))
    cand = shared + 0.04 + 0.005 * rng.standard_normal((3, 40))
    paired = estimate_paired(cand, shared)
    assert paired.gain == pytest.approx(float((cand - shared).mean()))
    assert paired.diff_sd is not None and paired.diff_sd < 0.01
    p_paired, _ = acceptance_probability({"acc": paired}, target, proposal_index=1, seed=7)
    p_apart, _ = acceptance_probability(
        {"acc": estimate(cand, shared)}, target, proposal_index=1, seed=7
    )
    assert p_paired > 0.9 and p_apart < 0.5
    with pytest.raises(ValueError, match="one shape"):
        estimate_paired(cand[:2], shared)


def test_a_regression_on_a_non_target_holds_a_clear_target_gain(tmp_path: Path) -> None:
    benches = [
        _bench("acc", tmp_path, target=True),
        _bench("other", tmp_path, target=False, tolerance=0.01),
    ]
    rng = np.random.default_rng(2)
    noise = 0.01 * rng.standard_normal((3, 20))
    evidence = {
        "acc": estimate(0.7 + noise, 0.5 + noise[::-1]),
        "other": estimate(0.4 + noise, 0.5 + noise[::-1]),  # 0.1 worse, the tolerance 0.01
    }
    probability, rates = acceptance_probability(evidence, benches, proposal_index=1, seed=3)
    assert probability < 0.05
    assert rates["acc"] > 0.9 and rates["other"] < 0.05


def _outcome(lab: Lab, campaign_id: str) -> tuple[dict[str, JsonValue], list[Candidate]]:
    intents = lab.store.query_as(Intent, campaign_id=campaign_id)
    final = next(i.result for i in intents if i.key == "final-proposal")
    assert final is not None
    return dict(final), lab.store.query_as(Candidate, campaign_id=campaign_id)


def test_a_clearly_better_config_is_proposed_and_accepted(tmp_path: Path) -> None:
    accepted = 0
    for seed in (0, 1, 2):
        task = tuning_task(tmp_path / f"task-{seed}", seed=seed)
        lab = Lab.init(tmp_path / f"lab-{seed}")
        try:
            result = run_campaign(lab, task, budget=Budget(experiments=12), seed=seed)
            final, candidates = _outcome(lab, result.campaign_id)
        finally:
            lab.close()
        probability = final["probability"]
        assert isinstance(probability, float) and probability >= 0.5
        assert "paired seed sd" in str(final["prediction"])  # the race ran on shared seeds
        assert len(candidates) == 1  # proposed once
        accepted += candidates[0].state == CandidateState.ACCEPTED
    assert accepted >= 2  # measured: 3 of 3 (and 8 of 8 seeds at 20 experiments)


def test_a_flat_task_gives_no_contender_on_shared_seeds(lab: Lab, tmp_path: Path) -> None:
    # A flat task: every config has the same quality, and a run's noise is its seed's. Each
    # config's k-th run shares the k-th seed, so every config ties the reference seed by seed
    # and nothing races or is proposed (drawn on seeds of their own, the best of the noise
    # was estimated at 0.38 to 0.68 and proposed, and the controller rejected it).
    task = tuning_task(tmp_path / "task", seed=3, flat=True)
    result = run_campaign(lab, task, budget=Budget(experiments=12), seed=3)
    final, candidates = _outcome(lab, result.campaign_id)
    assert candidates == [] and final == {"accepted": False}
    done = [i.result for i in lab.store.query_as(Intent, campaign_id=result.campaign_id)]
    runs = [r for r in done if r is not None and "seed" in r]
    assert len(runs) == 12
    firsts: dict[str, int] = {}
    for r in runs:
        firsts.setdefault(json.dumps(r["config"], sort_keys=True), r["seed"])
    assert set(firsts.values()) == {3001}  # every config's first run: campaign seed 3, run 1
    assert len({r["score"] for r in runs if r["seed"] == 3001}) == 1  # flat: one score a seed


_REF = SimpleNamespace(
    experiment_id="exp-ref", failed=False, config={"lr": 0.1}, score=0.5, seed=None
)
_WIN = SimpleNamespace(
    experiment_id="exp-win", failed=False, config={"lr": 0.2}, score=0.6, seed=None
)


class _Door:
    """Keeps the arguments of the last tool call the Reviewer made."""

    def __init__(self) -> None:
        self.said: dict[str, object] = {}

    def reviewer(self, tool: str, **args: object) -> None:
        self.said = {"tool": tool, **args}


@pytest.mark.parametrize(
    ("probability", "advice", "words"),
    [
        (0.3, Recommendation.CONTINUE, "the campaign's last proposal should be held"),
        (0.05, Recommendation.STOP, "hold the proposal"),
        (None, Recommendation.STOP, "nothing to judge"),
        (0.7, Recommendation.CONTINUE, "likely accepts it: propose it"),
    ],
)
def test_the_last_proposals_review_advises_what_the_floor_decides(
    lab: Lab,
    monkeypatch: pytest.MonkeyPatch,
    probability: float | None,
    advice: Recommendation,
    words: str,
) -> None:
    """A last proposal is held only below the floor (0.1 here), so its review advises holding
    only then; a mid-campaign proposal's review advises holding below one half."""
    accepts = probability is not None and probability >= 0.5
    fixed = Prediction(accepts, "r", {"acc": True, "robust": accepts}, probability)
    monkeypatch.setattr(reviewer_agent, "predict_acceptance", lambda *a, **k: fixed)
    door = _Door()
    context = SimpleNamespace(
        door=door,
        store=lab.store,
        task=None,
        tier=DataTier.DEV,
        seed=1,
        target="acc",
        say=lambda *args: None,
    )
    reviewer = reviewer_agent.Reviewer(context)  # type: ignore[arg-type]
    view = SimpleNamespace(runs=[_REF, _WIN], ref_config=lambda: dict(_REF.config))
    direction = SimpleNamespace(id="dir-1")
    winner = SimpleNamespace(runs=[_WIN], mean=0.6, gain=0.1)
    reviewer.predict(view, direction, winner, 2, last_floor=0.1)  # type: ignore[arg-type]
    assert door.said["recommendation"] == str(advice)
    assert words in str(door.said["rationale"])
    if probability is not None and 0.1 <= probability < 0.5:  # mid-campaign: held
        reviewer.predict(view, direction, winner, 2)  # type: ignore[arg-type]
        assert door.said["recommendation"] == str(Recommendation.STOP)
        assert "robust fails): hold the proposal" in str(door.said["rationale"])


def test_run_noise_on_each_sample_is_averaged_as_the_controllers_seeds_average_it(
    tmp_path: Path,
) -> None:
    """Two models that each answer every sample at random (right 30% of the time, afresh on
    each run) differ on many samples between any two runs, but not in what they expect: the
    controller's mean over 12-24 seeds averages that away. Two models that are each steady
    but right on different samples do differ sample by sample, and that stays."""
    rng = np.random.default_rng(4)
    runs, n = 3, 150
    random_c = (rng.random((runs, n)) < 0.3).astype(float)
    random_r = (rng.random((runs, n)) < 0.3).astype(float)
    noisy = estimate(random_c, random_r)
    # per-sample variance of a mean of 3 runs of p = 0.3, for each arm: 0.21 / 3
    assert noisy.sample_var * n == pytest.approx(2 * 0.21 / 3, rel=0.3)
    assert noisy.run_var == pytest.approx(2 * 0.21, rel=0.2)
    assert noisy.item_var < 0.25 * noisy.sample_var * n  # nearly all of it is run noise
    steady_c = np.tile((rng.random(n) < 0.3).astype(float), (runs, 1))
    steady_r = np.tile((rng.random(n) < 0.3).astype(float), (runs, 1))
    steady = estimate(steady_c, steady_r)
    assert steady.run_var == 0.0
    assert steady.item_var == pytest.approx(steady.sample_var * n)
    assert steady.sample_var_at(24) == pytest.approx(steady.sample_var)
    assert noisy.sample_var_at(24) < 0.25 * noisy.sample_var

    benches = [
        _bench("acc", tmp_path, target=True),
        _bench("other", tmp_path, target=False, tolerance=0.05),
    ]
    jitter = 0.01 * rng.standard_normal((2, runs, 20))
    clear = estimate(0.7 + jitter[0], 0.5 + jitter[1])

    def passes(other: object) -> float:
        evidence = {"acc": clear, "other": other}
        _, rates = acceptance_probability(evidence, benches, proposal_index=1, seed=5)  # type: ignore[arg-type]
        return rates["other"]

    # the same gain and the same observed per-sample spread at 3 runs, all of it run noise or
    # all of it a steady sample-by-sample difference: the first passes non-inferiority far
    # more often, as it would at the controller
    as_if_steady = replace(noisy, item_var=noisy.sample_var * n, run_var=0.0)
    assert passes(noisy) - passes(as_if_steady) > 0.2
