"""benchmarks/bench_campaigns.py: campaign-level false acceptance and overheads, tiny sizes.

The classification is checked on hand-written records whose true effects are known; the
campaign and overhead runs are checked for sane numbers only (nothing is timed here).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from benchmarks.bench_campaigns import (
    RULES,
    CampaignOutcome,
    acceptance_campaign,
    accepted_effects,
    campaign_outcome,
    greedy_effects,
    kept_outcomes,
    measure_overhead,
    overhead_rows,
    rule_row,
    run_campaigns,
    slow_harness,
    tree_truth,
)
from benchmarks.bench_controller import _Effect, _harness_with
from benchmarks.kept import JsonLines, KeptResultsError

from rsilab.records import (
    Candidate,
    CandidateState,
    EventDraft,
    Experiment,
    ExperimentState,
    Metric,
    MetricSource,
    Record,
    SystemVersion,
)
from rsilab.store.lab import Lab
from rsilab.tasks import get_task

START = {"lr": 0.03, "width": 16, "dropout": 0.3, "epochs": 4, "optimizer": "sgd"}
BETTER = {**START, "epochs": 16, "optimizer": "adam"}  # quality up, robustness unchanged
WORSE = {**START, "lr": 0.3}  # quality and robustness down
WIDER = {**START, "width": 1024, "dropout": 0.1}  # quality up, robustness far down
CAMPAIGN = "cmp-test"


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    with Lab.init(tmp_path / "lab") as opened:
        yield opened


def _tree(lab: Lab, tmp: Path, config: dict[str, Any], name: str) -> str:
    tree = _harness_with(get_task("synthetic"), config, tmp / name)
    return lab.artifacts.put_tree(tree).sha256


def _write(lab: Lab, *records: Record) -> None:
    lab.store.commit(EventDraft(actor="test", role="controller", action="test"), list(records))


def _version(lab: Lab, sha: str, label: str, parent: str | None = None) -> SystemVersion:
    version = SystemVersion(task="synthetic", label=label, harness_sha256=sha, parent_id=parent)
    _write(lab, version)
    return version


def _accept(lab: Lab, head: SystemVersion, sha: str, index: int) -> SystemVersion:
    version = _version(lab, sha, f"H{index}/M{index}", head.id)
    candidate = Candidate(
        campaign_id=CAMPAIGN,
        task="synthetic",
        parent_version_id=head.id,
        harness_sha256=sha,
        proposal_index=index,
        state=CandidateState.ACCEPTED,
        compared_to=head.id,
        version_id=version.id,
    )
    _write(lab, candidate)
    return version


def test_truth_of_a_tree_reads_config_and_variant(lab: Lab, tmp_path: Path) -> None:
    sha = _tree(lab, tmp_path, BETTER, "better")
    truth = tree_truth(lab, sha)
    assert dict(truth.config) == BETTER and truth.variant == "base"
    tree = _harness_with(get_task("synthetic"), START, tmp_path / "warm")
    train = tree / "train.py"
    train.write_text(train.read_text().replace('VARIANT = "base"', 'VARIANT = "warmup"'))
    warm = tree_truth(lab, lab.artifacts.put_tree(tree).sha256)
    assert warm.variant == "warmup"
    start = tree_truth(lab, _tree(lab, tmp_path, START, "start"))
    assert warm.effect_over(start).quality_gain == pytest.approx(0.03)


def test_accepted_versions_are_classified_by_their_true_effect(lab: Lab, tmp_path: Path) -> None:
    start = _version(lab, _tree(lab, tmp_path, START, "start"), "H0/M0")
    better = _accept(lab, start, _tree(lab, tmp_path, BETTER, "better"), 1)
    # judged against the moved head: WORSE's config is START's with lr 0.3, worse than BETTER
    worse = _accept(lab, better, _tree(lab, tmp_path, WORSE, "worse"), 2)
    _accept(lab, worse, _tree(lab, tmp_path, WIDER, "wider"), 3)
    rejected = Candidate(
        campaign_id=CAMPAIGN,
        task="synthetic",
        parent_version_id=start.id,
        harness_sha256=better.harness_sha256,
        state=CandidateState.REJECTED,
        compared_to=start.id,
    )
    _write(lab, rejected)

    effects = accepted_effects(lab, CAMPAIGN, {})

    assert [e.positive for e in effects] == [True, False, False]
    assert effects[0].quality_gain > 0 and effects[0].robustness_change == pytest.approx(0.0)
    assert effects[1].quality_gain < 0  # no quality gain over the head it replaced
    assert effects[2].robustness_change < -0.02  # robustness lost beyond tolerance
    row = rule_row("rsilab", [CampaignOutcome(accepted={"rsilab": effects})])
    assert row["accepted versions"] == 3
    assert row["false-acceptance rate [Wilson 95%]"].startswith("66.7%")


def _experiment(lab: Lab, sha: str, quality: float, robustness: float) -> None:
    metrics = [
        Metric(name=name, value=value, split="dev", source=MetricSource.CONTROLLER)
        for name, value in (("quality", quality), ("robustness", robustness))
    ]
    exp = Experiment(
        campaign_id=CAMPAIGN,
        direction_id="dir-test",
        workspace_hash=sha,
        state=ExperimentState.SUCCEEDED,
        metrics=metrics,
    )
    _write(lab, exp)


def test_greedy_accepts_the_best_first_dev_score_above_the_start(lab: Lab, tmp_path: Path) -> None:
    start_sha = _tree(lab, tmp_path, START, "start")
    start = tree_truth(lab, start_sha)
    _experiment(lab, start_sha, 0.50, 0.70)  # the reference run
    _experiment(lab, _tree(lab, tmp_path, WIDER, "wider"), 0.70, 0.60)  # best dev, fragile
    _experiment(lab, _tree(lab, tmp_path, WORSE, "worse"), 0.60, 0.69)
    _experiment(lab, start_sha, 0.99, 0.99)  # a re-run of the start: not a greedy option

    found = greedy_effects(lab, CAMPAIGN, start, {})

    [greedy] = found["greedy"]
    assert greedy == tree_truth(lab, _tree(lab, tmp_path, WIDER, "w2")).effect_over(start)
    assert not greedy.positive  # robustness lost beyond tolerance
    [guarded] = found["greedy-guarded"]  # WIDER dropped: its dev robustness fell by 0.10
    assert guarded.quality_gain < 0 and not guarded.positive


def test_greedy_accepts_nothing_without_a_dev_gain(lab: Lab, tmp_path: Path) -> None:
    start_sha = _tree(lab, tmp_path, START, "start")
    _experiment(lab, start_sha, 0.50, 0.70)
    _experiment(lab, _tree(lab, tmp_path, BETTER, "better"), 0.45, 0.70)
    found = greedy_effects(lab, CAMPAIGN, tree_truth(lab, start_sha), {})
    assert found == {"greedy": [], "greedy-guarded": []}


def test_a_real_campaign_yields_an_outcome_per_rule(lab: Lab, tmp_path: Path) -> None:
    outcome = acceptance_campaign(0, experiments=3)
    assert outcome.error == ""
    assert outcome.experiments == 3 and outcome.seconds > 0
    assert set(outcome.accepted) == set(RULES)
    assert all(isinstance(e, _Effect) for v in outcome.accepted.values() for e in v)
    assert 0.03 <= outcome.start_quality <= 0.97


def test_campaign_outcome_of_hand_written_records(lab: Lab, tmp_path: Path) -> None:
    start = _version(lab, _tree(lab, tmp_path, START, "start"), "H0/M0")
    _accept(lab, start, _tree(lab, tmp_path, BETTER, "better"), 1)
    outcome = campaign_outcome(lab, CAMPAIGN, start.id)
    assert outcome.proposals == 1 and outcome.experiments == 0
    assert [e.positive for e in outcome.accepted["rsilab"]] == [True]
    assert outcome.accepted["greedy"] == []  # no reference run recorded


def test_slow_harness_spins_in_train(tmp_path: Path) -> None:
    harness = slow_harness(tmp_path / "h", seconds=0.01)
    text = (harness / "train.py").read_text()
    assert "_bench_until" in text
    assert json.loads((harness / "config.json").read_text())


def test_overhead_measurement_gives_sane_numbers(tmp_path: Path) -> None:
    run = measure_overhead(tmp_path, experiments=1, seconds=0.05, seeds=1)
    baseline, campaign = run.phases
    assert baseline.jobs and campaign.jobs
    assert len(baseline.bare_s) == len(baseline.jobs)
    assert run.experiments == 1
    assert run.cost.events > 0 and run.cost.records > 0
    assert run.cost.db_bytes > 0 and run.cost.blob_bytes > 0 and run.cost.blob_files > 0
    rows = overhead_rows(run)
    for row in rows[:3]:
        assert row["jobs"] > 0
        assert row["ratio (target <= 1.05)"] >= 0.5
        assert row["instrumentation taken out s"] >= 0
    assert any(r["measured"] == "per experiment: ledger events" for r in rows)


def test_a_kept_outcome_reads_back_as_it_was_written(tmp_path: Path) -> None:
    kept = JsonLines(tmp_path / "acceptance.jsonl")
    outcome = CampaignOutcome(
        experiments=30, proposals=3, accepted={"rsilab": [_Effect(0.1, -0.01)], "greedy": []},
        seconds=20.0, start_quality=0.44, index=7, commit="abc1234",
    )  # fmt: skip
    kept.append({**outcome.to_json(), "budget": 30})
    kept.append({**CampaignOutcome(index=8).to_json(), "budget": 16})  # another size: ignored
    assert kept_outcomes(kept, 30) == [outcome]
    with kept.path.open("a") as out:
        out.write('{"index": 9}\n')
    with pytest.raises(KeptResultsError, match=r"acceptance\.jsonl:3 is not a kept result"):
        kept_outcomes(kept, 30)


@pytest.mark.timeout(300)
def test_a_full_run_goes_on_from_the_kept_campaigns(tmp_path: Path) -> None:
    kept = JsonLines(tmp_path / "acceptance.jsonl")
    earlier = CampaignOutcome(experiments=3, accepted={"rsilab": [_Effect(0.1, 0.0)]}, index=4)
    kept.append({**earlier.to_json(), "budget": 3})
    # The kept campaign holds the accepted version asked for: nothing new starts.
    assert run_campaigns(0.0, 3, kept=kept, accepted_target=1) == [earlier]
    # Without a target, at least MIN_CAMPAIGNS new ones run, at the next indices, and are kept.
    outcomes = run_campaigns(0.0, 3, kept=kept)
    assert [o.index for o in outcomes] == [4, 5, 6]
    assert all(o.error == "" and o.commit for o in outcomes[1:]), outcomes
    assert [o.index for o in kept_outcomes(kept, 3)] == [4, 5, 6]
