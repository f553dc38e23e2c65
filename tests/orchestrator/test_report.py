"""Campaign reports, over campaigns built through the tools and records written as the
controller writes them."""

from __future__ import annotations

import json

import pytest

from rsilab.errors import NotFoundError
from rsilab.expos import open_campaign
from rsilab.orchestrator.report import CampaignReport, build_report, render_markdown
from rsilab.orchestrator.report._build import direction_reports, experiment_budget
from rsilab.orchestrator.report._usage import active_wall
from rsilab.orchestrator.research.dag import ResearchDag
from rsilab.records import (
    BenchmarkDecision,
    Candidate,
    CandidateState,
    DataTier,
    Evaluation,
    Event,
    EventDraft,
    FlagStage,
    Job,
    JobInputs,
    JobKind,
    JobStatus,
    Lineage,
    ProtocolFlag,
    Resources,
    Role,
    SampleScore,
    SystemVersion,
    TaskRef,
    lineage_id,
    utc_now,
)
from rsilab.stats import paired_gain
from tests.expos.helpers import Bench

BASE = [[0.2, 0.4, 0.6, 0.8, 0.5], [0.3, 0.4, 0.5, 0.9, 0.4]]
BETTER = [[0.5, 0.5, 0.7, 0.9, 0.6], [0.4, 0.6, 0.8, 0.9, 0.7], [0.5, 0.6, 0.7, 1.0, 0.6]]


def _final(subject: str, matrix: list[list[float]], campaign_id: str | None) -> Evaluation:
    return Evaluation(
        campaign_id=campaign_id,
        benchmark="accuracy",
        tier=DataTier.FINAL,
        subject_id=subject,
        metric="accuracy",
        samples=[
            SampleScore(sample_id=f"s{i}", epoch=k, score=v)
            for k, row in enumerate(matrix)
            for i, v in enumerate(row)
        ],
    )


def _baseline(bench: Bench) -> SystemVersion:
    """The digits lineage's first version, with a final-tier evaluation of BASE."""
    version = SystemVersion(task="digits", label="H0/M0", harness_sha256="0" * 64)
    evaluation = _final(version.id, BASE, None)
    version.evaluation_ids = [evaluation.id]
    version.scores = {"accuracy": paired_gain(BASE, [[0.0] * 5] * 2)}
    lineage = Lineage(task="digits", head_id=version.id, versions=[version.id])
    bench.store.commit(
        EventDraft(actor="controller", role="controller", action="baseline"),
        [evaluation, version, lineage],
    )
    return version


def _accept(bench: Bench, baseline: SystemVersion, campaign_id: str) -> SystemVersion:
    """An accepted candidate of ``campaign_id`` whose version scores BETTER."""
    candidate = Candidate(
        campaign_id=campaign_id,
        task="digits",
        parent_version_id=baseline.id,
        harness_sha256="1" * 64,
        state=CandidateState.ACCEPTED,
        reason="accepted (alpha_j=0.025): accuracy gain",
        finished_at=utc_now(),
    )
    version = SystemVersion(
        task="digits",
        label="H1/M1",
        harness_sha256="1" * 64,
        parent_id=baseline.id,
        candidate_id=candidate.id,
    )
    evaluation = _final(version.id, BETTER, campaign_id)
    version.evaluation_ids = [evaluation.id]
    version.scores = {"accuracy": paired_gain(BETTER, [[0.0] * 5] * 3)}
    candidate.version_id = version.id
    current = bench.store.get_as(lineage_id("digits", "main"), Lineage)
    moved = current.model_copy(
        update={"head_id": version.id, "versions": [*current.versions, version.id]}
    )
    bench.store.commit(
        EventDraft(
            actor="controller",
            role="controller",
            action="candidate_accepted",
            campaign_id=campaign_id,
        ),
        [evaluation, candidate, version, moved],
    )
    return version


def test_an_empty_campaign_reports_every_section(any_bench: Bench) -> None:
    report = build_report(any_bench.store, any_bench.campaign.id)
    assert report.campaign.experiments == 0 and report.directions == []
    assert report.baseline is None and report.accepted == [] and report.rejected == []
    assert set(report.flags.by_stage) == {str(s) for s in FlagStage}
    assert [b.name for b in report.benchmarks] == ["accuracy"]
    text = render_markdown(report)
    for heading in (
        "## Summary",
        "## Research DAG",
        "## Accepted versions",
        "## Rejected candidates",
        "## Protocol flags by stage",
        "## Resources",
        "## Lock-in and review measures",
    ):
        assert heading in text
    assert "no baseline" in text and "No directions yet" in text


def test_an_unknown_campaign_is_not_found(any_bench: Bench) -> None:
    with pytest.raises(NotFoundError):
        build_report(any_bench.store, "cmp-000000000000")


def test_directions_carry_their_experiments_dev_scores_and_reviews(bench: Bench) -> None:
    a = bench.direction("wider | more")
    b = bench.direction("deeper", parents=[{"parent_id": a, "relation": "branch"}])
    ok, bad = bench.experiment(a), bench.experiment(a)
    bench.finish(ok)
    bench.finish(bad, "failed")
    for exp, scores in ((ok, [1.0, 0.0, 1.0, 1.0]), (bad, [0.0, 0.0, 1.0, 0.0])):
        bench.put(
            Evaluation(
                campaign_id=bench.campaign.id,
                benchmark="accuracy",
                tier=DataTier.DEV,
                subject_id=exp,
                metric="accuracy",
                samples=[SampleScore(sample_id=f"d{i}", score=s) for i, s in enumerate(scores)],
            )
        )
    bench.ok(
        Role.REVIEWER,
        "submit_review",
        {
            "experiment_ids": [ok],
            "direction_id": a,
            "verdict": "supports",
            "recommendation": "verify",
            "rationale": "wider beats the rest",
        },
    )
    report = build_report(bench.store, bench.campaign.id)
    first, second = report.directions
    assert (first.id, first.experiments, first.succeeded, first.failed) == (a, 2, 1, 1)
    assert first.best_dev["accuracy"].score == 0.75
    assert first.best_dev["accuracy"].experiment_id == ok
    assert [(r.verdict, r.recommendation) for r in first.reviews] == [("supports", "verify")]
    dag = ResearchDag.load(bench.store, bench.campaign.id)
    lower = direction_reports(bench.store, dag, {"accuracy": False})[0].best_dev["accuracy"]
    assert (lower.score, lower.experiment_id) == (0.25, bad)  # where lower is better
    assert second.parents == [{"parent_id": a, "relation": "branch"}] and second.experiments == 0
    text = render_markdown(report)
    assert f"branch: {b}" in text and "supports->verify" in text
    assert "wider beats the rest" in text
    assert "| wider \\| more |" in text  # a pipe in a table cell is escaped


def test_accepted_versions_show_scores_and_paired_gains_over_the_baseline(bench: Bench) -> None:
    baseline = _baseline(bench)
    version = _accept(bench, baseline, bench.campaign.id)
    report = build_report(bench.store, bench.campaign.id)
    assert report.baseline is not None and report.baseline.id == baseline.id
    assert report.start is not None and report.start.id == baseline.id
    (accepted,) = report.accepted
    assert (accepted.version_id, accepted.label) == (version.id, "H1/M1")
    gain = accepted.vs_baseline["accuracy"]
    assert gain == paired_gain(BETTER, BASE)
    assert gain is not None and 0 < gain.low < gain.value < gain.high
    assert report.campaign.accepted == 1
    text = render_markdown(report)
    assert f"after: H1/M1 `{version.id}`" in text
    assert f"{gain.value:+.4f} [{gain.low:+.4f}, {gain.high:+.4f}]" in text

    # A later campaign on the same lineage starts from the accepted version.
    later = open_campaign(bench.store, TaskRef(name="digits"))
    again = build_report(bench.store, later.id)
    assert again.start is not None and again.start.id == version.id
    assert again.baseline is not None and again.baseline.id == baseline.id
    assert "Started from: H1/M1" in render_markdown(again)


def test_candidates_not_accepted_keep_their_reasons(bench: Bench) -> None:
    baseline = _baseline(bench)
    common = {"campaign_id": bench.campaign.id, "task": "digits", "harness_sha256": "2" * 64}
    rejected = Candidate(
        **common,
        parent_version_id=baseline.id,
        state=CandidateState.REJECTED,
        reason="rejected: accuracy lower bound -0.01 <= 0.004",
        compared_to=baseline.id,
        decisions=[
            BenchmarkDecision(
                benchmark="accuracy",
                target=True,
                gain=0.02,
                low=-0.01,
                high=0.05,
                level=0.95,
                threshold=0.004,
                passed=False,
            )
        ],
        finished_at=utc_now(),
    )
    invalid = Candidate(
        **common,
        parent_version_id=baseline.id,
        proposal_index=2,
        state=CandidateState.INVALID,
        reason="train exited 1",
        finished_at=utc_now(),
    )
    pending = Candidate(**common, parent_version_id=baseline.id, proposal_index=3)
    for c in (rejected, invalid, pending):
        bench.put(c)
    report = build_report(bench.store, bench.campaign.id)
    assert [(r.candidate_id, r.state) for r in report.rejected] == [
        (rejected.id, "rejected"),
        (invalid.id, "invalid"),
    ]
    assert report.rejected[0].decisions[0].gain.low == -0.01
    assert report.pending == [pending.id]
    text = render_markdown(report)
    assert "train exited 1" in text and "lower bound -0.01 <= 0.004" in text
    assert f"Not decided yet: `{pending.id}`" in text


def test_flags_are_counted_by_stage_and_rule(bench: Bench) -> None:
    for stage, rule, blocked in (
        (FlagStage.TRAINING, "private_overlap", True),
        (FlagStage.TRAINING, "private_overlap", True),
        (FlagStage.REPORTING, "unreconciled_number", False),
    ):
        bench.put(
            ProtocolFlag(
                campaign_id=bench.campaign.id,
                stage=stage,
                rule=rule,
                detail="seen",
                blocked=blocked,
            )
        )
    flags = build_report(bench.store, bench.campaign.id).flags
    assert flags.total == 3 and len(flags.items) == 3
    training, reporting = flags.by_stage["training"], flags.by_stage["reporting"]
    assert (training.count, training.blocked, training.rules) == (2, 2, {"private_overlap": 2})
    assert (reporting.count, reporting.detected) == (1, 1)
    assert flags.by_stage["inference"].count == 0


def test_resources_come_from_jobs_and_llm_events(bench: Bench) -> None:
    cid = bench.campaign.id
    inputs = JobInputs(workspace_sha256="0" * 64, seed=1)
    for kind, cpu in ((JobKind.TRAIN, 2.0), (JobKind.TRAIN, 3.0), (JobKind.CONTROLLER_TRAIN, 4.0)):
        bench.put(
            Job(
                campaign_id=cid,
                kind=kind,
                status=JobStatus.SUCCEEDED,
                inputs=inputs,
                resources=Resources(cpu_s=cpu, wall_s=cpu + 1, peak_rss_mb=10 * cpu),
            )
        )
    for cost in (0.25, 0.0):
        bench.store.commit(
            EventDraft(
                actor="main-1",
                role="main",
                action="llm_call",
                campaign_id=cid,
                cost=Resources(tokens_in=100, tokens_out=10, cost_usd=cost),
            )
        )
    res = build_report(bench.store, cid).resources
    assert res.cpu_s == 9.0
    assert (res.jobs["train"].count, res.jobs["train"].wall_s) == (2, 7.0)
    assert res.jobs["train"].peak_rss_mb == 30.0
    assert res.jobs["controller-train"].cpu_s == 4.0
    llm = res.llm
    assert (llm.calls, llm.tokens_in, llm.tokens_out) == (2, 200, 20)
    assert (llm.cost_usd, llm.unpriced_calls) == (0.25, 1)
    text = render_markdown(build_report(bench.store, cid))
    assert "0.2500 USD (1 calls without a known price are not in it)" in text


def test_resources_per_actor_add_up_to_the_totals(bench: Bench) -> None:
    cid = bench.campaign.id
    exp = bench.experiment(bench.direction())  # by worker-1 (and main-1's direction)
    inputs = JobInputs(workspace_sha256="0" * 64, seed=1)
    for actor, cpu in (("worker-1", 2.0), ("controller", 4.0), ("", 1.0)):
        job = Job(
            campaign_id=cid,
            kind=JobKind.TRAIN,
            status=JobStatus.SUCCEEDED,
            inputs=inputs,
            resources=Resources(cpu_s=cpu, wall_s=cpu + 1),
            actor=actor,
            experiment_id=exp,
        )
        bench.put(job)
    bench.store.commit(
        EventDraft(
            actor="main-1",
            role="main",
            action="llm_call",
            campaign_id=cid,
            cost=Resources(tokens_in=100, tokens_out=10, cost_usd=0.5),
        )
    )
    report = build_report(bench.store, cid)
    rows = {r.actor: r for r in report.resources.by_actor}
    assert set(rows) == {"main-1", "worker-1", "controller", "(unnamed)"}
    assert (rows["worker-1"].experiments, rows["worker-1"].job_cpu_s) == (1, 2.0)
    assert rows["worker-1"].tool_calls == 1 and rows["main-1"].tool_calls == 1
    assert (rows["main-1"].llm_calls, rows["main-1"].cost_usd) == (1, 0.5)
    total = report.resources.totals
    assert total is not None and total.job_cpu_s == report.resources.cpu_s == 7.0
    assert total.job_wall_s == 10.0 and total.experiments == 1 and total.llm_calls == 1
    assert report.team == []
    text = render_markdown(report)
    assert "### By actor" in text and "| total | 1 | 7.0 | 10.0 | 1 | 110 |" in text
    assert "## Team" not in text


def _event(seq: int, action: str, at: str) -> Event:
    return Event(actor="x", role="controller", action=action, seq=seq, at=at, prev_hash="0" * 64)


def test_active_wall_time_leaves_out_time_while_stopped() -> None:
    events = [
        _event(1, "campaign_created", "2025-01-01T10:00:00Z"),
        _event(2, "lease_acquired", "2025-01-01T10:00:01Z"),
        _event(3, "tool_call", "2025-01-01T10:00:31Z"),
        _event(4, "lease_acquired", "2025-01-02T09:00:00Z"),  # resumed a day later
        _event(5, "tool_call", "2025-01-02T09:01:00Z"),
    ]
    assert active_wall(events) == (90.0, 2)
    assert active_wall([]) == (0.0, 0)


def test_the_json_form_round_trips(bench: Bench) -> None:
    baseline = _baseline(bench)
    _accept(bench, baseline, bench.campaign.id)
    bench.direction("wider")
    report = build_report(bench.store, bench.campaign.id)
    dumped = json.loads(json.dumps(report.model_dump(mode="json")))
    assert CampaignReport.model_validate(dumped) == report
    assert dumped["report_version"] == 1 and dumped["measures"]["directions"] == 1


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        ("experiments=40,wall=1200s,tokens=2000000", 40),
        ("wall=20m, experiments=7", 7),
        ({"experiments": 12, "wall_s": 60}, 12),
        ("wall=20m", None),
        (None, None),
    ],
)
def test_the_experiment_budget_is_read_from_either_stored_form(
    stored: object, expected: int | None
) -> None:
    assert experiment_budget(stored) == expected
