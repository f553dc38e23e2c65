"""A campaign's records as run plans: the campaign, each experiment, each accepted version.

Every number comes from the records or from the campaign's report
(:func:`rsilab.orchestrator.report.build_report`), never from a tracker: the tracker holds a
copy, and the tags say of which lab and at which ledger position.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from rsilab.export._plan import (
    CAMPAIGN_TAG,
    COPY_TAG,
    HEAD_TAG,
    KIND_TAG,
    LAB_TAG,
    RECORD_TAG,
    Point,
    RunPlan,
    RunStatus,
    flatten,
    metric_key,
    millis,
)
from rsilab.orchestrator.report import AcceptedReport, CampaignReport, build_report
from rsilab.records import (
    Campaign,
    CampaignState,
    Candidate,
    Direction,
    Event,
    Experiment,
    ExperimentState,
    Interval,
    Job,
    MetricSource,
)
from rsilab.store import Store

CAMPAIGN_STATUS = {
    CampaignState.RUNNING: RunStatus.RUNNING,
    CampaignState.STOPPED: RunStatus.KILLED,
    CampaignState.FINISHED: RunStatus.FINISHED,
    CampaignState.FAILED: RunStatus.FAILED,
}
EXPERIMENT_STATUS = {
    ExperimentState.CREATED: RunStatus.RUNNING,
    ExperimentState.RUNNING: RunStatus.RUNNING,
    ExperimentState.SUCCEEDED: RunStatus.FINISHED,
    ExperimentState.FAILED: RunStatus.FAILED,
    ExperimentState.CANCELLED: RunStatus.KILLED,
}


@dataclass(frozen=True)
class Snapshot:
    """A campaign's run plans as read at one ledger position."""

    campaign: Campaign
    lab_id: str
    head: tuple[int, str]
    """The ledger's (sequence, hash) read before any record: every record read is at least
    this new."""
    runs: list[RunPlan]

    @property
    def parent(self) -> RunPlan:
        """The campaign's own run (always the first)."""
        return self.runs[0]


def campaign_snapshot(store: Store, campaign_id: str) -> Snapshot:
    """The run plans of ``campaign_id``: the campaign first, then its experiments and its
    accepted versions, oldest first. Raises NotFoundError for an unknown campaign."""
    head = store.head()
    campaign = store.get_as(campaign_id, Campaign)  # first: later reads are at least as new
    report = build_report(store, campaign_id)
    identity = {LAB_TAG: store.lab_id, CAMPAIGN_TAG: campaign_id, COPY_TAG: _copy_note(store)}
    events = store.events(campaign_id=campaign_id)
    creators = _creators(events)
    directions = {d.id: d for d in store.query_as(Direction, campaign_id=campaign_id)}
    jobs = store.query_as(Job, campaign_id=campaign_id)
    runs = [_campaign_run(campaign, report, events)]
    for exp in store.query_as(Experiment, campaign_id=campaign_id):
        mine = [j for j in jobs if j.experiment_id == exp.id]
        runs.append(_experiment_run(exp, directions.get(exp.direction_id), creators, mine))
    candidates = {c.id: c for c in store.query_as(Candidate, campaign_id=campaign_id)}
    runs.extend(_version_run(a, candidates[a.candidate_id], campaign_id) for a in report.accepted)
    for run in runs:
        run.tags.update(identity)
        run.tags.update({RECORD_TAG: run.record_id, KIND_TAG: run.kind})
    # In the campaign's plan, so its run is brought to each new head (a child run carries the
    # head of the export that last wrote it).
    runs[0].tags[HEAD_TAG] = f"{head[0]}:{head[1]}"
    return Snapshot(campaign=campaign, lab_id=store.lab_id, head=head, runs=runs)


def _copy_note(store: Store) -> str:
    return (
        f"a copy of the audited records of rsilab lab {store.lab_id}; the lab's ledger is "
        "the record of truth (check it with `rsilab verify`)"
    )


def _creators(events: list[Event]) -> dict[str, tuple[str, str]]:
    """Record id -> (actor, role) of the first event that wrote it."""
    out: dict[str, tuple[str, str]] = {}
    for event in events:
        for ref in event.records:
            out.setdefault(ref.id, (event.actor, event.role))
    return out


def _interval_points(key: str, interval: Interval, at_ms: int) -> list[Point]:
    """A value and its interval's bounds as three step-0 points: KEY, KEY/low, KEY/high."""
    return [
        Point(key, interval.value, 0, at_ms),
        Point(f"{key}/low", interval.low, 0, at_ms),
        Point(f"{key}/high", interval.high, 0, at_ms),
    ]


def _campaign_run(campaign: Campaign, report: CampaignReport, events: list[Event]) -> RunPlan:
    """The parent run: the campaign's settings as tags (a resume may change its budget, and
    params cannot change), its totals as gauges, the baseline's final-tier scores."""
    ended = campaign.state is not CampaignState.RUNNING and events
    summary = report.campaign
    run = RunPlan(
        record_id=campaign.id,
        kind="campaign",
        name=f"{campaign.id} {campaign.task.name}",
        parent_record_id=None,
        status=CAMPAIGN_STATUS[campaign.state],
        start_ms=millis(campaign.created_at),
        end_ms=millis(events[-1].at) if ended else None,
        params={"task": campaign.task.name, "task_digest": campaign.task.digest or ""},
    )
    run.tags.update({f"rsilab.setting.{k}": v for k, v in flatten(campaign.settings).items()})
    run.tags.update(
        {
            "rsilab.state": str(campaign.state),
            "rsilab.end_reason": str(campaign.end_reason or ""),
            "rsilab.lineage": summary.lineage,
            "mlflow.note.content": campaign.notes or campaign.end_detail,
        }
    )
    for bench in report.benchmarks:
        direction = "higher" if bench.higher_is_better else "lower"
        role = "target" if bench.target else "non-target"
        run.tags[f"rsilab.benchmark.{metric_key(bench.name)}"] = f"{role}, {direction} is better"
    used = report.resources
    run.gauges.update(
        {
            "experiments": float(summary.experiments),
            "candidates": float(summary.candidates),
            "accepted": float(summary.accepted),
            "rejected": float(len(report.rejected)),
            "protocol_flags": float(report.flags.total),
            "resources/cpu_s": used.cpu_s,
            "resources/wall_s": used.wall_s,
            "resources/llm_calls": float(used.llm.calls),
            "resources/tokens_in": float(used.llm.tokens_in),
            "resources/tokens_out": float(used.llm.tokens_out),
            "resources/cost_usd": used.llm.cost_usd,
        }
    )
    if summary.experiment_budget is not None:
        run.gauges["experiment_budget"] = float(summary.experiment_budget)
    if report.baseline is not None:
        for name, score in report.baseline.scores.items():
            key = metric_key("baseline", name)
            run.gauges[key] = score.value
            run.gauges.update({f"{key}/low": score.low, f"{key}/high": score.high})
    return run


def _experiment_run(
    exp: Experiment,
    direction: Direction | None,
    creators: dict[str, tuple[str, str]],
    jobs: list[Job],
) -> RunPlan:
    """A child run per experiment: its config as params, each logged number as a point
    (``dev/NAME`` for the controller's, ``agent/dev/NAME`` for a worker's own), its jobs'
    resources as gauges, its research direction, actor and role as tags."""
    actor, role = creators.get(exp.id, (exp.created_by, ""))
    run = RunPlan(
        record_id=exp.id,
        kind="experiment",
        name=exp.id,
        parent_record_id=exp.campaign_id,
        status=EXPERIMENT_STATUS[exp.state],
        start_ms=millis(exp.created_at),
        end_ms=millis(exp.finished_at) if exp.finished_at else None,
        params=flatten(exp.config),
    )
    run.tags.update(
        {
            "rsilab.state": str(exp.state),
            "rsilab.direction_id": exp.direction_id,
            "rsilab.direction": direction.title if direction else "",
            "rsilab.direction_state": str(direction.state) if direction else "",
            "rsilab.actor": exp.created_by or actor,
            "rsilab.role": role,
            "rsilab.parent_experiment_id": exp.parent_experiment_id or "",
            "mlflow.note.content": "\n\n".join(t for t in (exp.description, exp.summary_text) if t),
        }
    )
    steps: Counter[str] = Counter()
    for m in exp.metrics:
        origin = () if m.source is MetricSource.CONTROLLER else ("agent",)
        key = metric_key(*origin, m.split, m.name)
        # A value logged without a step gets its place among the key's values instead.
        step = m.step if m.step is not None else steps[key]
        steps[key] += 1
        run.points.append(Point(key, m.value, step, millis(m.at)))
    run.gauges.update(
        {
            "jobs/count": float(len(jobs)),
            "jobs/cpu_s": sum(j.resources.cpu_s for j in jobs),
            "jobs/wall_s": sum(j.resources.wall_s for j in jobs),
            "jobs/peak_rss_mb": max((j.resources.peak_rss_mb for j in jobs), default=0.0),
        }
    )
    return run


def _version_run(accepted: AcceptedReport, candidate: Candidate, campaign_id: str) -> RunPlan:
    """A child run per accepted version: final-tier scores with intervals (``final/B``), the
    paired gain over the baseline (``vs_baseline/B``), the controller's accept-tier decision
    (``accept/B/...``) and the lineage as tags."""
    at = millis(accepted.accepted_at or candidate.created_at)
    run = RunPlan(
        record_id=accepted.version_id,
        kind="version",
        name=f"{accepted.label} {accepted.version_id}",
        parent_record_id=campaign_id,
        status=RunStatus.FINISHED,
        start_ms=millis(candidate.created_at),
        end_ms=at,
        params={
            "proposal_index": str(candidate.proposal_index),
            "alpha": str(candidate.alpha),
            "warm_start": str(candidate.warm_start).lower(),
            "controller_seeds": str(len(candidate.seeds)),
        },
    )
    run.tags.update(
        {
            "rsilab.version_label": accepted.label,
            "rsilab.lineage": candidate.lineage,
            "rsilab.parent_version_id": accepted.parent_id or "",
            "rsilab.candidate_id": accepted.candidate_id,
            "rsilab.experiment_id": accepted.experiment_id or "",
            "rsilab.harness_sha256": candidate.harness_sha256,
            "rsilab.actor": candidate.proposer,
            "rsilab.decision": accepted.decision,
            "mlflow.note.content": accepted.decision,
        }
    )
    for bench, score in accepted.scores.items():
        run.points.extend(_interval_points(metric_key("final", bench), score, at))
    for bench, gain in accepted.vs_baseline.items():
        if gain is not None:
            run.points.extend(_interval_points(metric_key("vs_baseline", bench), gain, at))
    for d in candidate.decisions:
        key = metric_key("accept", d.benchmark)
        decided = Interval(value=d.gain, low=d.low, high=d.high, level=d.level)
        run.points.extend(_interval_points(f"{key}/gain", decided, at))
        run.points.append(Point(f"{key}/threshold", d.threshold, 0, at))
        run.points.append(Point(f"{key}/passed", 1.0 if d.passed else 0.0, 0, at))
    return run
