"""The numbers an agent's written text may cite: those the records it read hold.

Shared by the tools that take free text next to evidence (``submit_review``,
``publish_finding``): a number in the text that none of these holds is flagged (a
non-blocking ``reporting`` protocol flag), so a made-up figure cannot pass as a result.
"""

from __future__ import annotations

from collections.abc import Iterable

from rsilab.expos.context import ToolEnv
from rsilab.expos.reconcile import ReportedNumber, unreconciled_numbers
from rsilab.records import (
    Comparison,
    Evaluation,
    Experiment,
    FlagStage,
    MetricSource,
    ProtocolFlag,
)

COMPARED_SOURCES = frozenset(MetricSource)
"""The sources a comparison of experiments reads their dev values from, by the rule of
:meth:`~rsilab.records.Experiment.last_metric`: the controller's value where there is one, a
worker's own number only where there is none."""


def recorded_numbers(
    env: ToolEnv,
    exps: list[Experiment],
    comparisons: Iterable[Comparison] = (),
    evaluations: Iterable[Evaluation] = (),
) -> list[float]:
    """Numbers a job or the controller produced in these records.

    Only produced numbers count: controller metrics, evaluation aggregates, config values
    (the recipe, not a measurement) and comparisons computed wholly from controller metrics.
    Agent-reported metrics do not: an agent could otherwise log a made-up score with
    ``log_metric`` and then cite it. Every comparison must be over experiments in ``exps``.
    """
    known: list[float] = []
    evals = list(evaluations)
    for exp in exps:
        known += [m.value for m in exp.metrics if m.source is MetricSource.CONTROLLER]
        known += [v for v in exp.config.values() if isinstance(v, int | float)]
        evals += env.readable_as(Evaluation, fields={"subject_id": exp.id})
    for evaluation in evals:
        for interval in evaluation.aggregates.values():
            known += [interval.value, interval.low, interval.high]
    by_id = {e.id: e for e in exps}
    for c in comparisons:
        used = [
            by_id[i].last_metric(c.metric, sources=COMPARED_SOURCES) for i in (*c.a_ids, *c.b_ids)
        ]
        if all(m is None or m.source is MetricSource.CONTROLLER for m in used):
            known += [c.a_mean, c.b_mean, c.effect.value, c.effect.low, c.effect.high]
    return known


def unreconciled(
    env: ToolEnv,
    text: str,
    exps: list[Experiment],
    comparisons: Iterable[Comparison] = (),
    evaluations: Iterable[Evaluation] = (),
) -> list[ReportedNumber]:
    """Numbers in ``text`` that none of :func:`recorded_numbers` holds."""
    return unreconciled_numbers(text, recorded_numbers(env, exps, comparisons, evaluations))


def stage_reporting_flag(
    env: ToolEnv, campaign_id: str, *, rule: str, detail: str, tool: str
) -> ProtocolFlag:
    """Stage a non-blocking ``reporting`` flag on the caller's use of ``tool``."""
    return env.stage(
        ProtocolFlag(
            campaign_id=campaign_id,
            stage=FlagStage.REPORTING,
            rule=rule,
            detail=detail,
            actor=env.call.actor,
            role=str(env.call.role),
            tool=tool,
            blocked=False,
        )
    )
