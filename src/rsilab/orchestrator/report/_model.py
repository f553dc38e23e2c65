"""The shape of a campaign report: pydantic models, so ``--format json`` is their dump.

Every number here is read from the store; none comes from an agent. Scores of versions are
the controller's final-tier scores (the accept tier decided, the final tier is reported, so
selection does not inflate them). ``REPORT_VERSION`` names this shape for readers of the JSON.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from rsilab.orchestrator.report._failures import FailureGroup
from rsilab.orchestrator.research.measures import LockInMeasures
from rsilab.records import CampaignReview, Interval, Model

REPORT_VERSION = 1
"""Version of the report's JSON shape; bumped when a field changes meaning or goes away."""


class BenchmarkInfo(Model):
    """What the task says about one benchmark (absent when the task cannot be loaded here)."""

    name: str = Field(description="Benchmark name.")
    target: bool = Field(description="True for a target benchmark.")
    higher_is_better: bool = Field(description="Direction of its score.")


class ReviewSummary(Model):
    """One review of a direction's evidence."""

    id: str = Field(description="Review id.")
    verdict: str = Field(description="supports, refutes or inconclusive.")
    recommendation: str = Field(description="continue, verify, branch, revise or stop.")
    rationale: str = Field(description="The reviewer's reasons, in words.")
    experiment_ids: list[str] = Field(description="Experiments it read.")
    effects: dict[str, Interval] = Field(
        default_factory=dict, description="Computed effects (a minus b) by metric."
    )


class DevBest(Model):
    """A direction's best dev score on one benchmark (means over dev samples)."""

    score: float = Field(description="Mean dev score of the best experiment.")
    experiment_id: str = Field(description="That experiment.")


class DirectionReport(Model):
    """A node of the research DAG with its status and the evidence gathered under it."""

    id: str = Field(description="Direction id.")
    title: str = Field(description="Short name.")
    state: str = Field(description="open, promising, supported, refuted or exhausted.")
    hypothesis: str = Field(description="What it tests.")
    parents: list[dict[str, str]] = Field(
        default_factory=list, description="Incoming edges: parent_id and relation."
    )
    conclusion: str = Field(default="", description="Why it reached its current state.")
    experiments: int = Field(description="Experiments created under it.")
    succeeded: int = Field(description="Of those, succeeded.")
    failed: int = Field(description="Of those, failed or cancelled.")
    best_dev: dict[str, DevBest] = Field(
        default_factory=dict, description="Best dev score per benchmark (controller-scored)."
    )
    reviews: list[ReviewSummary] = Field(default_factory=list, description="Reviews of it.")


class VersionScores(Model):
    """A version of the lineage with its final-tier scores."""

    id: str = Field(description="Version id.")
    label: str = Field(description="H{i}/M{j}.")
    scores: dict[str, Interval] = Field(description="Final-tier score per benchmark.")


class AcceptedReport(Model):
    """A version this campaign's proposals added to the lineage."""

    version_id: str = Field(description="The version made.")
    label: str = Field(description="H{i}/M{j}.")
    candidate_id: str = Field(description="Candidate it was accepted from.")
    parent_id: str | None = Field(description="Version it was judged against and replaced.")
    experiment_id: str | None = Field(description="Experiment the candidate came from.")
    accepted_at: str | None = Field(description="When the controller decided.")
    scores: dict[str, Interval] = Field(description="Final-tier score per benchmark.")
    vs_baseline: dict[str, Interval | None] = Field(
        description="Paired final-tier difference (version minus baseline, raw score units) "
        "with a 95% interval counting seed and sample noise; None where not computable."
    )
    decision: str = Field(description="The controller's reason (accept-tier numbers).")


class CandidateDecision(Model):
    """The controller's accept-tier comparison on one benchmark."""

    benchmark: str = Field(description="Benchmark name.")
    target: bool = Field(description="True for a target benchmark.")
    gain: Interval = Field(description="Oriented gain over the version compared to.")
    threshold: float = Field(description="What the lower bound had to clear.")
    passed: bool = Field(description="Whether the benchmark passed its rule.")


class RejectedReport(Model):
    """A candidate that did not become a version: rejected, invalid or stale."""

    candidate_id: str = Field(description="Candidate id.")
    state: str = Field(description="rejected, invalid or stale.")
    proposal_index: int = Field(description="j-th proposal of the campaign.")
    experiment_id: str | None = Field(description="Experiment it came from.")
    compared_to: str | None = Field(description="Version it was judged against, if judged.")
    reason: str = Field(description="Why, in the controller's words.")
    decisions: list[CandidateDecision] = Field(
        default_factory=list, description="Per-benchmark comparisons, when it got that far."
    )


class StageFlags(Model):
    """Protocol flags of one stage."""

    count: int = Field(description="Flags raised.")
    blocked: int = Field(description="Of those, refused actions.")
    detected: int = Field(description="Of those, detections that were not refusals.")
    rules: dict[str, int] = Field(default_factory=dict, description="Flags per rule.")


class FlagItem(Model):
    """One protocol flag."""

    id: str = Field(description="Flag id.")
    stage: str = Field(description="Stage.")
    rule: str = Field(description="Rule that fired.")
    detail: str = Field(description="What happened.")
    actor: str = Field(description="Who did it.")
    blocked: bool = Field(description="True if refused.")
    at: str = Field(description="When it was recorded.")


class FlagsReport(Model):
    """Protocol flags by stage (every stage listed, zero or not)."""

    total: int = Field(description="Flags raised in the campaign.")
    by_stage: dict[str, StageFlags] = Field(description="Per stage.")
    items: list[FlagItem] = Field(default_factory=list, description="Every flag, oldest first.")


class JobUse(Model):
    """Jobs of one kind and what they used."""

    count: int = Field(description="Jobs recorded.")
    cpu_s: float = Field(description="CPU seconds.")
    wall_s: float = Field(description="Wall seconds, summed over jobs.")
    peak_rss_mb: float = Field(description="Largest peak resident memory of one job, MiB.")


class LlmUse(Model):
    """LLM calls recorded in the ledger."""

    calls: int = Field(description="Calls made.")
    tokens_in: int = Field(description="Prompt tokens.")
    tokens_out: int = Field(description="Completion tokens.")
    cost_usd: float = Field(description="USD of the calls whose price is known.")
    unpriced_calls: int = Field(
        description="Calls that used tokens but cost 0 in the ledger: no price was known."
    )


class ActorUse(Model):
    """What one actor of the campaign used and produced (a row of the per-actor table)."""

    SUMMED: ClassVar[tuple[str, ...]] = (
        "experiments",
        "jobs",
        "job_cpu_s",
        "job_wall_s",
        "llm_calls",
        "tokens_in",
        "tokens_out",
        "cost_usd",
        "tool_calls",
        "findings",
        "adoptions",
        "assignments",
        "candidates",
        "accepted",
    )
    """The fields a total adds up."""

    actor: str = Field(description="Actor name: main, worker-1, researcher-2, leader, ...")
    orientation: str = Field(
        default="", description="A team researcher's latest orientation ('' otherwise)."
    )
    experiments: int = Field(default=0, description="Experiments it created.")
    jobs: int = Field(default=0, description="Jobs it started.")
    job_cpu_s: float = Field(default=0.0, description="CPU seconds of those jobs.")
    job_wall_s: float = Field(default=0.0, description="Wall seconds of those jobs, summed.")
    llm_calls: int = Field(default=0, description="LLM calls it made.")
    tokens_in: int = Field(default=0, description="Prompt tokens.")
    tokens_out: int = Field(default=0, description="Completion tokens.")
    cost_usd: float = Field(default=0.0, description="USD of its priced LLM calls.")
    tool_calls: int = Field(default=0, description="Experiment OS tool calls it made.")
    findings: int = Field(default=0, description="Findings it published.")
    adoptions: int = Field(default=0, description="Adoptions of findings it recorded.")
    assignments: int = Field(default=0, description="Assignments it received (a researcher).")
    candidates: int = Field(default=0, description="Candidates it proposed.")
    accepted: int = Field(default=0, description="Of those, accepted by the controller.")


class AssignmentItem(Model):
    """One assignment of a team campaign: a researcher's orientation and why."""

    id: str = Field(description="Assignment id.")
    researcher: str = Field(description="The researcher.")
    orientation: str = Field(description="Orientation name.")
    orientation_version: int | None = Field(description="Version of its text in force.")
    reason: str = Field(description="The Leader's reason.")
    evidence: list[str] = Field(default_factory=list, description="Records it rests on.")
    supersedes: str | None = Field(default=None, description="The assignment it replaced.")
    leader: str = Field(default="", description="Who assigned it.")
    at: str = Field(description="When.")


class ResourcesReport(Model):
    """What the campaign used, from its jobs and its ledger events."""

    wall_s: float = Field(
        description="Active wall time: per run of the campaign (each lease taken), its first "
        "to its last event, summed; time while it was stopped is left out."
    )
    runs: int = Field(description="Times the campaign was run or resumed (leases taken).")
    cpu_s: float = Field(description="CPU seconds of every job.")
    jobs: dict[str, JobUse] = Field(default_factory=dict, description="Per job kind.")
    llm: LlmUse = Field(description="LLM calls.")
    by_actor: list[ActorUse] = Field(
        default_factory=list, description="Per actor (researcher, worker, ...), by name."
    )
    totals: ActorUse | None = Field(default=None, description="The per-actor rows added up.")


class CampaignSummary(Model):
    """Who, what and how much, in one place."""

    id: str = Field(description="Campaign id.")
    task: str = Field(description="Task name.")
    lineage: str = Field(description="Lineage the campaign proposed to.")
    state: str = Field(description="running, stopped, finished or failed.")
    end_reason: str | None = Field(
        default=None, description="Why its last run ended (an EndReason); None while running."
    )
    end_detail: str = Field(default="", description="The end in words.")
    created_at: str = Field(description="When it started.")
    settings: dict[str, Any] = Field(description="Agents, budget, workers, seed.")
    notes: str = Field(default="", description="Free text from the person who started it.")
    experiments: int = Field(description="Experiments created.")
    experiment_budget: int | None = Field(
        default=None, description="Experiments its budget allows; None where none was recorded."
    )
    candidates: int = Field(description="Candidates proposed.")
    accepted: int = Field(description="Of those, accepted.")


class CampaignReport(Model):
    """Everything ``rsilab report`` shows about one campaign."""

    report_version: int = Field(default=REPORT_VERSION, description="Shape of this report.")
    generated_at: str = Field(description="When the report was made, ISO-8601 UTC.")
    campaign: CampaignSummary = Field(description="The campaign.")
    benchmarks: list[BenchmarkInfo] = Field(
        default_factory=list, description="The task's benchmarks (empty if not loadable here)."
    )
    directions: list[DirectionReport] = Field(description="The DAG's nodes, oldest first.")
    failures: list[FailureGroup] = Field(
        default_factory=list,
        description="Why experiments failed or were cancelled: each reason once, with its "
        "count and an example, most frequent first.",
    )
    dag_text: str = Field(description="The DAG as an indented tree, for people.")
    baseline: VersionScores | None = Field(description="The lineage's first version.")
    start: VersionScores | None = Field(
        description="The lineage head when the campaign started (the baseline, or a later one)."
    )
    accepted: list[AcceptedReport] = Field(description="Versions accepted, oldest first.")
    rejected: list[RejectedReport] = Field(description="Candidates not accepted, oldest first.")
    pending: list[str] = Field(default_factory=list, description="Candidates not yet decided.")
    flags: FlagsReport = Field(description="Protocol flags by stage.")
    resources: ResourcesReport = Field(description="Resources used.")
    measures: LockInMeasures = Field(description="Lock-in and review measures.")
    team: list[AssignmentItem] = Field(
        default_factory=list, description="A team campaign's assignments, oldest first."
    )
    review: CampaignReview | None = Field(
        default=None, description="A finished team campaign's campaign review."
    )
