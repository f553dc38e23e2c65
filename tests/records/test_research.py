"""An experiment's last value of a metric: which sources answer, and which value is last."""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal

from rsilab.records import Experiment, Metric, MetricSource

CONTROLLER, AGENT = MetricSource.CONTROLLER, MetricSource.AGENT_REPORTED
EVERY = frozenset(MetricSource)
Split = Literal["train", "dev"]


def _exp(*metrics: tuple[str, float, Split, MetricSource]) -> Experiment:
    logged = [Metric(name=n, value=v, split=s, source=src) for n, v, s, src in metrics]
    return Experiment(direction_id="dir-000000000000", metrics=logged)


def _last(
    exp: Experiment,
    name: str = "accuracy",
    *,
    split: Split = "dev",
    sources: Collection[MetricSource] = (CONTROLLER,),
) -> tuple[float, str] | None:
    """(value, source) of :meth:`Experiment.last_metric`; the default sources are its own."""
    m = exp.last_metric(name, split=split, sources=sources)
    return None if m is None else (m.value, str(m.source))


def test_the_last_controller_value_of_several() -> None:
    exp = _exp(
        ("accuracy", 0.61, "dev", CONTROLLER),
        ("accuracy", 0.72, "dev", CONTROLLER),
        ("accuracy", 0.65, "dev", CONTROLLER),
    )
    assert _last(exp) == (0.65, "controller")
    default = exp.last_metric("accuracy")  # the reader's own default: the controller's values
    assert default is not None and (default.value, default.source) == (0.65, "controller")


def test_a_later_agent_value_does_not_displace_the_controllers() -> None:
    exp = _exp(
        ("accuracy", 0.61, "dev", CONTROLLER),
        ("accuracy", 0.70, "dev", CONTROLLER),
        ("accuracy", 0.99, "dev", AGENT),
    )
    assert _last(exp) == (0.70, "controller")
    assert _last(exp, sources=EVERY) == (0.70, "controller")
    assert _last(exp, sources={AGENT}) == (0.99, "agent-reported")


def test_agent_values_answer_only_when_admitted_and_the_controller_has_none() -> None:
    exp = _exp(("accuracy", 0.5, "dev", AGENT), ("accuracy", 0.55, "dev", AGENT))
    assert exp.last_metric("accuracy") is None
    assert _last(exp) is None
    assert _last(exp, sources=EVERY) == (0.55, "agent-reported")
    assert _last(exp, sources=()) is None


def test_other_splits_and_other_names_never_answer() -> None:
    exp = _exp(
        ("accuracy", 0.8, "train", CONTROLLER),
        ("loss", 0.3, "dev", CONTROLLER),
        ("accuracy", 0.6, "dev", AGENT),
        ("accuracy", 0.9, "train", AGENT),
    )
    assert _last(exp) is None
    assert _last(exp, sources=EVERY) == (0.6, "agent-reported")
    assert _last(exp, split="train") == (0.8, "controller")
    assert _last(exp, split="train", sources={AGENT}) == (0.9, "agent-reported")
    assert _last(exp, "loss") == (0.3, "controller")
    assert _last(exp, "f1", sources=EVERY) is None


def test_no_metrics_no_value() -> None:
    assert _last(_exp(), sources=EVERY) is None
