"""``rsilab export mlflow`` against a real SQLite-backed MLflow tracking store, read back with
MLflow's own client: the runs hold the records' numbers (computed here from the records, not
by the exporter), a second export changes nothing, and what contradicts the records fails
with one line."""

from __future__ import annotations

import json
import sys
from statistics import fmean

import pytest
from mlflow import MlflowClient
from mlflow.entities import Run

from rsilab.export import ExportError, export_mlflow
from rsilab.orchestrator.report import build_report
from rsilab.records import (
    Campaign,
    Candidate,
    CandidateState,
    DataTier,
    Direction,
    Evaluation,
    Experiment,
    Job,
    MetricSource,
    SystemVersion,
)
from rsilab.store import Lab
from tests.cli.helpers import explain, rsilab
from tests.export.conftest import MLFLOW_WARNINGS, CampaignLab

pytestmark = MLFLOW_WARNINGS

EXPERIMENT = "rsilab-synthetic"
"""The MLflow experiment a synthetic campaign goes to by default."""


def _runs(client: MlflowClient, query: str = "") -> list[Run]:
    experiment = client.get_experiment_by_name(EXPERIMENT)
    assert experiment is not None
    return list(client.search_runs([experiment.experiment_id], query, max_results=1000))


def _by_record(client: MlflowClient) -> dict[str, Run]:
    runs = _runs(client)
    found = {r.data.tags["rsilab.record_id"]: r for r in runs}
    assert len(found) == len(runs), "two runs copy one record"
    return found


def _history(client: MlflowClient, run: Run) -> dict[str, list[tuple[int, float]]]:
    """Every metric of ``run`` with its whole history as (step, value)."""
    run_id = run.info.run_id
    return {
        key: [(m.step, m.value) for m in client.get_metric_history(run_id, key)]
        for key in run.data.metrics
    }


def _export(lab: CampaignLab, uri: str) -> dict[str, str]:
    with Lab.open(lab.path) as opened:
        return export_mlflow(opened.store, lab.campaign_id, tracking_uri=uri).run_ids


def test_the_campaign_run_is_a_marked_copy(lab_env: CampaignLab, tracking_uri: str) -> None:
    _export(lab_env, tracking_uri)
    client = MlflowClient(tracking_uri)
    with Lab.open(lab_env.path) as opened:
        seq, digest = opened.store.head()
        lab_id = opened.store.lab_id
        campaign = opened.store.get_as(lab_env.campaign_id, Campaign)
        experiments = opened.store.query_as(Experiment, campaign_id=campaign.id)
        accepted = [
            c
            for c in opened.store.query_as(Candidate, campaign_id=campaign.id)
            if c.state is CandidateState.ACCEPTED
        ]
    (parent,) = _runs(client, f"tags.`rsilab.record_id` = '{campaign.id}'")
    tags = parent.data.tags
    assert tags["rsilab.lab_id"] == lab_id
    assert tags["rsilab.ledger_head"] == f"{seq}:{digest}"
    assert lab_id in tags["rsilab.copy_of"] and "rsilab verify" in tags["rsilab.copy_of"]
    assert tags["rsilab.state"] == "finished" and parent.info.status == "FINISHED"
    assert tags["rsilab.setting.seed"] == "2"
    assert tags["rsilab.benchmark.quality"] == "target, higher is better"
    assert parent.data.params["task"] == "synthetic"
    assert parent.data.metrics["experiments"] == len(experiments) == 6
    assert parent.data.metrics["accepted"] == len(accepted) == 1
    children = _runs(client, f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    assert len(children) == len(experiments) + len(accepted)
    kinds = sorted(r.data.tags["rsilab.kind"] for r in children)
    assert kinds == ["experiment"] * 6 + ["version"]


def test_experiment_runs_hold_config_dev_scores_and_resources(
    lab_env: CampaignLab, tracking_uri: str
) -> None:
    _export(lab_env, tracking_uri)
    client = MlflowClient(tracking_uri)
    runs = _by_record(client)
    with Lab.open(lab_env.path) as opened:
        store = opened.store
        experiments = store.query_as(Experiment, campaign_id=lab_env.campaign_id)
        jobs = store.query_as(Job, campaign_id=lab_env.campaign_id)
        titles = {d.id: d.title for d in store.query_as(Direction)}
    for exp in experiments:
        run = runs[exp.id]
        assert run.info.status == "FINISHED"
        assert run.data.tags["rsilab.actor"] == "worker-1"
        assert run.data.tags["rsilab.role"] == "worker"
        assert run.data.tags["rsilab.direction"] == titles[exp.direction_id]
        params = run.data.params
        assert set(params) == set(exp.config)
        for name, value in exp.config.items():
            assert (params[name] if isinstance(value, str) else float(params[name])) == value
        history = _history(client, run)
        for name in ("quality", "robustness"):
            logged = [
                (m.step or 0, m.value)
                for m in exp.metrics
                if m.name == name and m.split == "dev" and m.source is MetricSource.CONTROLLER
            ]
            assert logged and history[f"dev/{name}"] == logged
        mine = [j for j in jobs if j.experiment_id == exp.id]
        assert run.data.metrics["jobs/count"] == len(mine) > 0
        assert run.data.metrics["jobs/cpu_s"] == pytest.approx(sum(j.resources.cpu_s for j in mine))


def _final_samples(lab: Lab, version: SystemVersion, bench: str) -> dict[str, list[float]]:
    """Sample id -> every final-tier score of ``version`` on ``bench`` (all seeds)."""
    out: dict[str, list[float]] = {}
    for ev_id in version.evaluation_ids:
        ev = lab.store.get_as(ev_id, Evaluation)
        if ev.tier is DataTier.FINAL and ev.benchmark == bench:
            for s in ev.samples:
                out.setdefault(s.sample_id, []).append(s.score)
    return out


def test_the_accepted_version_run_holds_final_scores_gain_and_decision(
    lab_env: CampaignLab, tracking_uri: str
) -> None:
    _export(lab_env, tracking_uri)
    client = MlflowClient(tracking_uri)
    runs = _by_record(client)
    with Lab.open(lab_env.path) as opened:
        (candidate,) = [
            c
            for c in opened.store.query_as(Candidate, campaign_id=lab_env.campaign_id)
            if c.state is CandidateState.ACCEPTED
        ]
        assert candidate.version_id is not None
        version = opened.store.get_as(candidate.version_id, SystemVersion)
        assert version.parent_id is not None
        baseline = opened.store.get_as(version.parent_id, SystemVersion)
        report = build_report(opened.store, lab_env.campaign_id)
        mine = {b: _final_samples(opened, version, b) for b in version.scores}
        theirs = {b: _final_samples(opened, baseline, b) for b in version.scores}
    run = runs[version.id]
    metrics, tags = run.data.metrics, run.data.tags
    assert tags["rsilab.version_label"] == "H1/M1"
    assert tags["rsilab.parent_version_id"] == baseline.id
    assert tags["rsilab.candidate_id"] == candidate.id
    assert tags["rsilab.experiment_id"] == candidate.experiment_id
    assert tags["rsilab.decision"] == candidate.reason and candidate.reason.startswith("accepted")
    (shown,) = report.accepted
    for bench, score in version.scores.items():
        assert metrics[f"final/{bench}"] == score.value
        assert (metrics[f"final/{bench}/low"], metrics[f"final/{bench}/high"]) == (
            score.low,
            score.high,
        )
        # The gain over the baseline: the difference of the final-tier means over the
        # samples both were scored on, every seed counted (the interval is the report's).
        shared = sorted(set(mine[bench]) & set(theirs[bench]))
        gain = fmean(x for s in shared for x in mine[bench][s]) - fmean(
            x for s in shared for x in theirs[bench][s]
        )
        assert metrics[f"vs_baseline/{bench}"] == pytest.approx(gain, abs=1e-12)
        interval = shown.vs_baseline[bench]
        assert interval is not None
        assert metrics[f"vs_baseline/{bench}/low"] == interval.low
        assert metrics[f"vs_baseline/{bench}/high"] == interval.high
    for d in candidate.decisions:
        assert metrics[f"accept/{d.benchmark}/gain"] == d.gain
        assert metrics[f"accept/{d.benchmark}/threshold"] == d.threshold
        assert metrics[f"accept/{d.benchmark}/passed"] == 1.0


def test_exporting_again_reuses_the_runs_and_logs_nothing(
    lab_env: CampaignLab, tracking_uri: str
) -> None:
    first = _export(lab_env, tracking_uri)
    client = MlflowClient(tracking_uri)
    before = {record: _history(client, run) for record, run in _by_record(client).items()}
    assert _export(lab_env, tracking_uri) == first
    after = {record: _history(client, run) for record, run in _by_record(client).items()}
    assert after == before
    assert {r: run.info.run_id for r, run in _by_record(client).items()} == first


def test_an_export_cut_short_is_completed_without_duplicates(
    lab_env: CampaignLab, tracking_uri: str
) -> None:
    """With the digest tags gone (as if each run's export stopped before its last write),
    the next export compares every run with its history and adds nothing twice."""
    _export(lab_env, tracking_uri)
    client = MlflowClient(tracking_uri)
    before = {record: _history(client, run) for record, run in _by_record(client).items()}
    for run in _by_record(client).values():
        client.delete_tag(run.info.run_id, "rsilab.export_digest")
    with Lab.open(lab_env.path) as opened:
        again = export_mlflow(opened.store, lab_env.campaign_id, tracking_uri=tracking_uri)
    assert (again.created, again.updated, again.values_logged) == (0, len(before), 0)
    after = {record: _history(client, run) for record, run in _by_record(client).items()}
    assert after == before


def test_a_run_whose_param_contradicts_the_record_fails_closed(
    lab_env: CampaignLab, tracking_uri: str
) -> None:
    run_ids = _export(lab_env, tracking_uri)
    client = MlflowClient(tracking_uri)
    with Lab.open(lab_env.path) as opened:
        exp = opened.store.query_as(Experiment, campaign_id=lab_env.campaign_id)[0]
        lab_id = opened.store.lab_id
    # A second run claiming the same experiment, as a concurrent export could leave.
    experiment = client.get_experiment_by_name(EXPERIMENT)
    assert experiment is not None
    tags = {
        "rsilab.record_id": exp.id,
        "rsilab.campaign_id": lab_env.campaign_id,
        "rsilab.lab_id": lab_id,
    }
    client.create_run(experiment.experiment_id, tags=tags)
    result = rsilab(
        "export",
        "mlflow",
        lab_env.campaign_id,
        "--tracking-uri",
        tracking_uri,
        "--lab",
        lab_env.path,
    )
    assert result.exit_code == 1, explain(result)
    assert result.stderr.startswith(f"error: two MLflow runs copy record {exp.id}"), explain(result)
    assert run_ids[exp.id] in result.stderr and "Traceback" not in result.stderr


def test_a_changed_param_is_refused(lab_env: CampaignLab, tracking_uri: str) -> None:
    with Lab.open(lab_env.path) as opened:
        exp = opened.store.query_as(Experiment, campaign_id=lab_env.campaign_id)[0]
        lab_id = opened.store.lab_id
    client = MlflowClient(tracking_uri)
    made = client.create_experiment(EXPERIMENT)
    tags = {
        "rsilab.record_id": exp.id,
        "rsilab.campaign_id": lab_env.campaign_id,
        "rsilab.lab_id": lab_id,
    }
    run = client.create_run(made, tags=tags)
    client.log_param(run.info.run_id, "lr", "999")
    with Lab.open(lab_env.path) as opened, pytest.raises(ExportError, match="param lr='999'"):
        export_mlflow(opened.store, lab_env.campaign_id, tracking_uri=tracking_uri)


def test_the_command_line_and_mlflows_default_uri(
    lab_env: CampaignLab, tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_uri)
    result = rsilab("export", "mlflow", "latest", "--json", "--lab", lab_env.path)
    assert result.exit_code == 0, explain(result)
    shown = json.loads(result.stdout)
    assert shown["tracking_uri"] == tracking_uri
    assert shown["campaign_id"] == lab_env.campaign_id
    assert (shown["created"], shown["unchanged"]) == (8, 0)
    assert f"mlflow ui --backend-store-uri {tracking_uri}" in result.stderr
    client = MlflowClient(tracking_uri)
    assert {r.info.run_id for r in _runs(client)} == set(shown["run_ids"].values())
    again = rsilab("export", "mlflow", "latest", "--lab", lab_env.path)
    assert again.exit_code == 0, explain(again)
    assert "(0 created, 0 updated, 8 unchanged), 0 metric values logged" in again.stdout


def test_a_deleted_mlflow_experiment_is_one_line(lab_env: CampaignLab, tracking_uri: str) -> None:
    client = MlflowClient(tracking_uri)
    client.delete_experiment(client.create_experiment(EXPERIMENT))
    result = rsilab(
        "export", "mlflow", "latest", "--tracking-uri", tracking_uri, "--lab", lab_env.path
    )
    assert result.exit_code == 1, explain(result)
    assert result.stderr.startswith(f"error: MLflow experiment '{EXPERIMENT}' is deleted")
    assert len(result.stderr.strip().splitlines()) == 1


def test_without_mlflow_one_line_names_the_extra(
    lab_env: CampaignLab, tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)  # `import mlflow` now raises ImportError
    result = rsilab(
        "export", "mlflow", "latest", "--tracking-uri", tracking_uri, "--lab", lab_env.path
    )
    assert result.exit_code == 1, explain(result)
    assert result.stderr.splitlines() == [
        "error: exporting to MLflow needs the mlflow package, which is not installed",
        "hint: install rsilab's mlflow extra: pip install 'rsilab[mlflow]'",
    ]


def test_an_unknown_campaign_is_a_usage_error(lab_env: CampaignLab, tracking_uri: str) -> None:
    result = rsilab(
        "export",
        "mlflow",
        "cmp-000000000000",
        "--tracking-uri",
        tracking_uri,
        "--lab",
        lab_env.path,
    )
    assert result.exit_code == 2, explain(result)
    assert "no campaign 'cmp-000000000000'" in result.stderr
