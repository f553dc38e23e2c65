"""Building a :class:`CampaignReport` from the store; it only reads."""

from __future__ import annotations

import re
from typing import Any

from rsilab.errors import UserError
from rsilab.orchestrator.report._actors import actor_uses, team_items, totals
from rsilab.orchestrator.report._failures import failure_groups
from rsilab.orchestrator.report._model import (
    BenchmarkInfo,
    CampaignReport,
    CampaignSummary,
    DevBest,
    DirectionReport,
    ResourcesReport,
    ReviewSummary,
)
from rsilab.orchestrator.report._outcomes import (
    accepted_reports,
    baseline_and_start,
    lineage_name,
    pending_ids,
    rejected_reports,
    version_scores,
)
from rsilab.orchestrator.report._usage import flags_report, resources_report
from rsilab.orchestrator.research.campaign_review import campaign_review_of
from rsilab.orchestrator.research.dag import ResearchDag
from rsilab.orchestrator.research.measures import lock_in_measures
from rsilab.records import (
    Campaign,
    Candidate,
    CandidateState,
    DataTier,
    Evaluation,
    Event,
    Experiment,
    ExperimentState,
    Job,
    ProtocolFlag,
    Review,
    TaskRef,
    utc_now,
)
from rsilab.stats import better
from rsilab.store import Store, StoreReader
from rsilab.tasks import get_task, load_ref, shown_order

_EXPERIMENTS = re.compile(r"(?:^|,)\s*experiments\s*=\s*(\d+)\s*(?:,|$)")


def build_report(store: Store, campaign_id: str) -> CampaignReport:
    """The report of ``campaign_id`` as the store holds it now.

    Works on a running campaign too (it reads, never writes). The task is loaded only to
    name its benchmarks' directions; a task that cannot be loaded here leaves
    ``benchmarks`` empty and changes nothing else.

    Raises:
        NotFoundError: there is no such campaign.
    """
    campaign = store.get_as(campaign_id, Campaign)
    candidates = sorted(
        store.query_as(Candidate, campaign_id=campaign_id), key=lambda c: c.created_at
    )
    lineage = lineage_name(campaign, candidates)
    baseline, start = baseline_and_start(store, campaign, lineage)
    dag = ResearchDag.load(store, campaign_id)
    events = store.events(campaign_id=campaign_id)
    benchmarks = task_benchmarks(campaign.task)
    higher = {b.name: b.higher_is_better for b in benchmarks}
    return CampaignReport(
        generated_at=utc_now(),
        campaign=CampaignSummary(
            id=campaign.id,
            task=campaign.task.name,
            lineage=lineage,
            state=str(campaign.state),
            end_reason=None if campaign.end_reason is None else str(campaign.end_reason),
            end_detail=campaign.end_detail,
            created_at=campaign.created_at,
            settings=dict(campaign.settings),
            notes=campaign.notes,
            experiments=sum(len(runs) for runs in dag.experiments.values()),
            experiment_budget=experiment_budget(campaign.settings.get("budget")),
            candidates=len(candidates),
            accepted=sum(1 for c in candidates if c.state == CandidateState.ACCEPTED),
        ),
        benchmarks=benchmarks,
        directions=direction_reports(store, dag, higher),
        failures=failure_groups(store, _in_order(dag)),
        dag_text=dag.render_text(),
        baseline=version_scores(baseline),
        start=version_scores(start),
        accepted=accepted_reports(store, candidates, baseline),
        rejected=rejected_reports(candidates),
        pending=pending_ids(candidates),
        flags=flags_report(store.query_as(ProtocolFlag, campaign_id=campaign_id)),
        resources=campaign_resources(store, campaign_id, events),
        measures=lock_in_measures(store, campaign_id),
        team=team_items(store, campaign_id),
        review=campaign_review_of(store, campaign_id),
    )


def _in_order(dag: ResearchDag) -> list[Experiment]:
    """The DAG's experiments, oldest first."""
    runs = (e for exps in dag.experiments.values() for e in exps)
    return sorted(runs, key=lambda e: (e.created_at, e.id))


def campaign_resources(
    store: StoreReader, campaign_id: str, events: list[Event] | None = None
) -> ResourcesReport:
    """Resources by job kind and in total, and per actor (the rows add up to the totals).

    ``events`` are the campaign's ledger events when the caller has read them already.
    """
    if events is None:
        events = store.events(campaign_id=campaign_id)
    jobs = store.query_as(Job, campaign_id=campaign_id)
    rows = actor_uses(store, campaign_id, jobs, events)
    used = resources_report(jobs, events)
    return used.model_copy(update={"by_actor": rows, "totals": totals(rows)})


def experiment_budget(budget: Any) -> int | None:
    """The experiment count of a stored budget: a mapping, or the text ``--budget`` takes
    (``experiments=40,wall=20m``); None when it names none or does not parse."""
    if isinstance(budget, dict):
        value = budget.get("experiments")
        return value if isinstance(value, int) else None
    if isinstance(budget, str):
        match = _EXPERIMENTS.search(budget)
        return int(match.group(1)) if match else None
    return None


def task_benchmarks(task: TaskRef | str) -> list[BenchmarkInfo]:
    """The benchmarks of a task (a campaign's recorded reference, or a name) with their target
    flag and direction, in the order they are shown (targets first, see
    :func:`rsilab.tasks.shown_order`); empty when the task cannot be loaded here."""
    try:
        loaded = load_ref(task) if isinstance(task, TaskRef) else get_task(task)
    except (KeyError, ValueError, UserError):  # not reachable from here: directions unknown
        return []
    return [
        BenchmarkInfo(name=b.name, target=b.target, higher_is_better=b.higher_is_better)
        for b in shown_order(loaded.benchmarks)
    ]


def direction_reports(
    store: StoreReader,
    dag: ResearchDag,
    higher: dict[str, bool] | None = None,
    dev: dict[str, dict[str, float]] | None = None,
) -> list[DirectionReport]:
    """Every direction of ``dag`` with its experiments' outcomes, best dev scores and reviews.

    ``higher`` says per benchmark whether a higher score is better (the default for a
    benchmark it does not name), so "best" is the lowest score where lower is better.
    ``dev`` gives the experiments' dev scores when the caller has them (else
    :func:`dev_means` reads them).
    """
    if dev is None:
        dev = dev_means(store, dag.campaign_id)
    out = []
    for d in dag.directions.values():
        exps = dag.experiments.get(d.id, [])
        out.append(
            DirectionReport(
                id=d.id,
                title=d.title,
                state=str(d.state),
                hypothesis=d.hypothesis,
                parents=[
                    {"parent_id": e.parent_id, "relation": str(e.relation)} for e in d.parents
                ],
                conclusion=d.conclusion,
                experiments=len(exps),
                succeeded=sum(1 for e in exps if e.state == ExperimentState.SUCCEEDED),
                failed=sum(
                    1
                    for e in exps
                    if e.state in {ExperimentState.FAILED, ExperimentState.CANCELLED}
                ),
                best_dev=_best_dev([e.id for e in exps], dev, higher or {}),
                reviews=[_review(r) for r in dag.reviews.get(d.id, [])],
            )
        )
    return out


def _best_dev(
    experiment_ids: list[str], dev: dict[str, dict[str, float]], higher: dict[str, bool]
) -> dict[str, DevBest]:
    """Per benchmark (in name order; displays order them), the experiment with the best mean
    dev score (the earliest of ties)."""
    best: dict[str, DevBest] = {}
    for exp in experiment_ids:
        for bench, score in dev.get(exp, {}).items():
            up = higher.get(bench, True)
            if bench not in best or better(score, best[bench].score, higher_is_better=up):
                best[bench] = DevBest(score=score, experiment_id=exp)
    return dict(sorted(best.items()))


def dev_means(store: StoreReader, campaign_id: str) -> dict[str, dict[str, float]]:
    """experiment id -> benchmark -> mean dev score over every dev evaluation of it (the
    controller's scores; the mean over all their samples and epochs)."""
    sums: dict[tuple[str, str], list[float]] = {}
    for ev in store.query_as(Evaluation, campaign_id=campaign_id):
        if ev.tier == DataTier.DEV and ev.samples:
            sums.setdefault((ev.subject_id, ev.benchmark), []).extend(s.score for s in ev.samples)
    out: dict[str, dict[str, float]] = {}
    for (subject, bench), scores in sums.items():
        out.setdefault(subject, {})[bench] = sum(scores) / len(scores)
    return out


def _review(review: Review) -> ReviewSummary:
    return ReviewSummary(
        id=review.id,
        verdict=str(review.verdict),
        recommendation=str(review.recommendation),
        rationale=review.rationale,
        experiment_ids=list(review.experiment_ids),
        effects={c.metric: c.effect for c in review.comparisons},
    )
