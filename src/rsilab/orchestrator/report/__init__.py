"""Campaign reports: everything a campaign did and used, read from the store.

:func:`build_report` reads one campaign's records and ledger into a :class:`CampaignReport`
(its ``model_dump(mode="json")`` is the JSON form); :func:`render_markdown` writes it for
people. Shown: the DAG of directions with status and evidence, each accepted version with
per-benchmark final-tier scores and paired intervals against the baseline, candidates not
accepted with the controller's reasons, protocol flags by stage, resources (CPU and wall time,
tokens, money where a price is known) and lock-in measures.

:func:`build_evolution_report` and :func:`render_evolution_markdown` do the same for an
evolution (``rsilab evolve``): a table of its rounds and the improver's own score.
"""

from __future__ import annotations

from rsilab.orchestrator.report._actors import team_items
from rsilab.orchestrator.report._build import (
    build_report,
    campaign_resources,
    dev_means,
    direction_reports,
    experiment_budget,
    task_benchmarks,
)
from rsilab.orchestrator.report._evolution import (
    EvolutionReport,
    build_evolution_report,
    render_evolution_markdown,
)
from rsilab.orchestrator.report._failures import FailureGroup, failure_groups
from rsilab.orchestrator.report._markdown import render_markdown
from rsilab.orchestrator.report._model import (
    REPORT_VERSION,
    AcceptedReport,
    ActorUse,
    AssignmentItem,
    BenchmarkInfo,
    CampaignReport,
    DirectionReport,
    FlagsReport,
    ResourcesReport,
    VersionScores,
)
from rsilab.orchestrator.report._outcomes import (
    accepted_reports,
    baseline_and_start,
    lineage_name,
    version_scores,
)
from rsilab.orchestrator.report._usage import flags_report

__all__ = [
    "REPORT_VERSION",
    "AcceptedReport",
    "ActorUse",
    "AssignmentItem",
    "BenchmarkInfo",
    "CampaignReport",
    "DirectionReport",
    "EvolutionReport",
    "FailureGroup",
    "FlagsReport",
    "ResourcesReport",
    "VersionScores",
    "accepted_reports",
    "baseline_and_start",
    "build_evolution_report",
    "build_report",
    "campaign_resources",
    "dev_means",
    "direction_reports",
    "experiment_budget",
    "failure_groups",
    "flags_report",
    "lineage_name",
    "render_evolution_markdown",
    "render_markdown",
    "task_benchmarks",
    "team_items",
    "version_scores",
]
