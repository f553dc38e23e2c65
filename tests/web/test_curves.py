"""An experiment's dev score on the dashboard's curves: the controller's last dev value."""

from __future__ import annotations

from rsilab.records import Experiment, Metric, MetricSource
from rsilab.web._curves import DevScore, dev_scores

START = "2026-01-01T00:00:00+00:00"


def _metric(name: str, value: float, at: str, source: MetricSource, split: str = "dev") -> Metric:
    return Metric.model_validate(
        {"name": name, "value": value, "split": split, "source": source, "at": at}
    )


def test_the_controllers_last_dev_value_and_when_it_was_recorded() -> None:
    controller, agent = MetricSource.CONTROLLER, MetricSource.AGENT_REPORTED
    exp = Experiment(
        direction_id="dir-000000000000",
        metrics=[
            _metric("accuracy", 0.6, "2026-01-01T00:01:00+00:00", controller),
            _metric("accuracy", 0.8, "2026-01-01T00:03:00+00:00", controller),
            _metric("accuracy", 0.99, "2026-01-01T00:04:00+00:00", agent),
            _metric("accuracy", 0.95, "2026-01-01T00:05:00+00:00", controller, split="train"),
            _metric("f1", 0.4, "2026-01-01T00:02:00+00:00", controller),
            _metric("loss", 0.1, "2026-01-01T00:02:00+00:00", agent),
        ],
    )
    silent = Experiment(
        direction_id="dir-000000000000",
        metrics=[_metric("accuracy", 0.7, "2026-01-01T00:01:00+00:00", agent)],
    )
    assert dev_scores([exp, silent], START) == {
        exp.id: {"accuracy": DevScore(0.8, 180.0), "f1": DevScore(0.4, 120.0)}
    }
