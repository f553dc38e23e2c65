"""What the controller decided for a campaign: versions accepted, candidates turned down.

Gains against the baseline are recomputed here from the stored final-tier evaluations (the
same per-sample, per-seed scores the controller wrote), paired by sample, with the
controller's own interval (:func:`~rsilab.stats.paired_gain`), so seed spread
counts as well as sample noise.
"""

from __future__ import annotations

from rsilab.controller.lineage import find_lineage, lineage_versions, matrix_of, version_evaluations
from rsilab.orchestrator.report._model import (
    AcceptedReport,
    CandidateDecision,
    RejectedReport,
    VersionScores,
)
from rsilab.records import (
    Campaign,
    Candidate,
    CandidateState,
    DataTier,
    Evaluation,
    Interval,
    SystemVersion,
)
from rsilab.stats import paired_gain
from rsilab.store import StoreReader

DEFAULT_LINEAGE = "main"


def lineage_name(campaign: Campaign, candidates: list[Candidate]) -> str:
    """The lineage a campaign works on: the one its settings name, else its candidates'
    (``main`` when it names none and proposed none)."""
    named = campaign.settings.get("lineage")
    if isinstance(named, str) and named:
        return named
    return candidates[0].lineage if candidates else DEFAULT_LINEAGE


def baseline_and_start(
    store: StoreReader, campaign: Campaign, lineage: str
) -> tuple[SystemVersion | None, SystemVersion | None]:
    """The lineage's first version, and its head when the campaign started.

    The head at the start is the newest version created before the campaign (the baseline
    when there is none: the runner makes the baseline for a campaign's first run). Both None
    when the lineage has no baseline in this lab.
    """
    found = find_lineage(store, campaign.task.name, lineage)
    if found is None:
        return None, None
    versions = lineage_versions(store, found)
    earlier = [v for v in versions if v.created_at <= campaign.created_at]
    return versions[0], (earlier[-1] if earlier else versions[0])


def version_scores(version: SystemVersion | None) -> VersionScores | None:
    """A version's final-tier scores for the report."""
    if version is None:
        return None
    return VersionScores(
        id=version.id, label=version.label, scores=dict(sorted(version.scores.items()))
    )


def accepted_reports(
    store: StoreReader, candidates: list[Candidate], baseline: SystemVersion | None
) -> list[AcceptedReport]:
    """Every accepted candidate's version, with its gains over ``baseline``."""
    out = []
    for c in candidates:
        if c.state != CandidateState.ACCEPTED or c.version_id is None:
            continue
        version = store.get_as(c.version_id, SystemVersion)
        out.append(
            AcceptedReport(
                version_id=version.id,
                label=version.label,
                candidate_id=c.id,
                parent_id=version.parent_id,
                experiment_id=c.experiment_id,
                accepted_at=c.finished_at,
                scores=dict(sorted(version.scores.items())),
                vs_baseline=gains_over(store, version, baseline),
                decision=c.reason,
            )
        )
    return out


def gains_over(
    store: StoreReader, version: SystemVersion, baseline: SystemVersion | None
) -> dict[str, Interval | None]:
    """Per benchmark, ``version`` minus ``baseline`` on the final tier, with a 95% interval.

    Raw score units (not oriented): for a lower-is-better benchmark a negative gain is an
    improvement. None for a benchmark either side lacks, or whose evaluations share fewer
    than two samples.
    """
    if baseline is None:
        return {}
    mine = version_evaluations(store, version, DataTier.FINAL)
    theirs = version_evaluations(store, baseline, DataTier.FINAL)
    return {name: _paired(mine[name], theirs.get(name)) for name in sorted(mine)}


def _paired(a: Evaluation, b: Evaluation | None) -> Interval | None:
    if b is None:
        return None
    shared = sorted({s.sample_id for s in a.samples} & {s.sample_id for s in b.samples})
    try:
        return paired_gain(matrix_of(a, shared), matrix_of(b, shared))
    except ValueError:  # too few shared samples, or an evaluation with holes
        return None


def rejected_reports(candidates: list[Candidate]) -> list[RejectedReport]:
    """Candidates that ended without a version (rejected, invalid, stale), oldest first."""
    return [
        RejectedReport(
            candidate_id=c.id,
            state=str(c.state),
            proposal_index=c.proposal_index,
            experiment_id=c.experiment_id,
            compared_to=c.compared_to,
            reason=c.reason,
            decisions=[
                CandidateDecision(
                    benchmark=d.benchmark,
                    target=d.target,
                    gain=Interval(value=d.gain, low=d.low, high=d.high, level=d.level),
                    threshold=d.threshold,
                    passed=d.passed,
                )
                for d in c.decisions
            ],
        )
        for c in candidates
        if c.is_finished() and c.state != CandidateState.ACCEPTED
    ]


def pending_ids(candidates: list[Candidate]) -> list[str]:
    """Candidates the controller has not decided yet."""
    return [c.id for c in candidates if not c.is_finished()]
