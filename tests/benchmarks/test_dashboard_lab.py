"""benchmarks/dashboard_lab.py: a small generated lab reads as a real campaign and verifies."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from benchmarks.dashboard_lab import generate_lab

from rsilab.controller.lineage import find_lineage
from rsilab.orchestrator.report import build_report
from rsilab.records import DataTier, Evaluation, Experiment, ExperimentState
from rsilab.store import Lab, verify_store


def test_a_generated_lab_reports_its_campaign_and_verifies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    campaign_id = generate_lab(tmp_path / "lab", 150, directions=12, samples=10, seed=1)
    assert "150 experiments" in capsys.readouterr().out  # it says how long it took
    with Lab.open(tmp_path / "lab") as lab:
        report = build_report(lab.store, campaign_id)
        lineage = find_lineage(lab.store, "synthetic")
        verified = verify_store(lab.store, artifacts=lab.artifacts, deep=True)
        tools = Counter(e.tool for e in lab.store.events(campaign_id=campaign_id))
        done = next(
            e
            for e in lab.store.query_as(Experiment, campaign_id=campaign_id)
            if e.state is ExperimentState.SUCCEEDED
        )
        dev = lab.store.query_as(Evaluation, fields={"subject_id": done.id})

    assert verified.ok, verified.problems
    assert verified.artifacts_checked > 0 and not verified.warnings
    assert report.campaign.state == "finished" and report.campaign.experiments == 150
    assert len(report.directions) == 12 and sum(d.experiments for d in report.directions) == 150
    assert {"open", "supported", "exhausted"} <= {d.state for d in report.directions}
    assert any(d.parents for d in report.directions) and report.measures.reviews > 0
    assert lineage is not None and report.baseline is not None
    assert report.campaign.accepted == len(report.accepted) == len(lineage.versions) - 1 >= 1
    assert [a.version_id for a in report.accepted] == lineage.versions[1:]
    # each experiment is named by its own tool-call events, as the dispatcher writes them
    assert tools["create_experiment"] == tools["finish_experiment"] == 150
    # a dev evaluation per benchmark, per sample, as a worker's dev-eval job records it
    assert sorted(e.benchmark for e in dev) == ["quality", "robustness"]
    assert all(e.tier is DataTier.DEV and len(e.samples) == 10 for e in dev)
    assert all(e.campaign_id == campaign_id and e.evaluator == "controller" for e in dev)
    assert {m.name for m in done.metrics} == {"quality", "robustness"}


def test_a_lab_needs_an_experiment_a_direction_and_two_samples(tmp_path: Path) -> None:
    for bad in ({"experiments": 0}, {"directions": 0}, {"samples": 1}):
        with pytest.raises(ValueError, match="at least"):
            generate_lab(tmp_path / "lab", **bad)
    assert not (tmp_path / "lab").exists()
