"""Run plans without a tracker: names MLflow accepts, config flattened to text, times, the
digest, and an experiment's numbers by origin and step (paths the synthetic campaign does not
take: a worker's own numbers, values logged without a step)."""

from __future__ import annotations

from rsilab.export._mlflow import MAX_TAG_CHARS, _cut
from rsilab.export._plan import Point, RunPlan, RunStatus, flatten, metric_key, millis
from rsilab.export._runs import _experiment_run
from rsilab.records import Experiment, Job, JobInputs, Metric, MetricSource, Resources


def test_names_keep_what_mlflow_accepts_and_replace_the_rest() -> None:
    assert metric_key("dev", "quality") == "dev/quality"
    assert metric_key("final", "acc@1 (top)") == "final/acc_1 _top_"
    assert metric_key("a//b", "/c/") == "a/b/c"


def test_config_is_flattened_to_text() -> None:
    config = {"lr": 0.03, "opt": "sgd", "net": {"width": 16, "act": "relu"}, "layers": [1, 2]}
    assert flatten(config) == {
        "lr": "0.03",
        "opt": "sgd",
        "net.width": "16",
        "net.act": "relu",
        "layers": "[1, 2]",
    }


def test_record_times_become_milliseconds() -> None:
    assert millis("2026-12-01T20:56:16.716275Z") == 1796158576716


def test_long_text_is_cut_to_the_limit_and_says_so() -> None:
    cut = _cut("x" * 9000, MAX_TAG_CHARS)
    assert len(cut) == 8000 and cut.endswith("[cut; the whole text is in the rsilab record]")
    assert _cut("short", MAX_TAG_CHARS) == "short"


def _plan(*points: Point) -> RunPlan:
    status = RunStatus.RUNNING
    return RunPlan("exp-1", "experiment", "exp-1", None, status, 0, None, points=[*points])


def test_the_digest_follows_the_content_not_its_order() -> None:
    a, b = Point("dev/q", 0.5, 0, 1), Point("dev/q", 0.6, 1, 2)
    assert _plan(a, b).digest() == _plan(b, a).digest()
    assert _plan(a, b).digest() != _plan(a, Point("dev/q", 0.7, 1, 2)).digest()


def test_an_experiments_numbers_by_origin_and_step() -> None:
    at = "2026-12-01T20:56:16.716275Z"
    exp = Experiment(
        campaign_id="cmp-1",
        direction_id="dir-1",
        created_by="worker-2",
        metrics=[
            Metric(name="loss", value=0.9, at=at, source=MetricSource.CONTROLLER),
            Metric(name="loss", value=0.7, at=at, source=MetricSource.CONTROLLER),
            Metric(name="loss", value=0.1, at=at, step=7),  # the worker's own number
            Metric(name="loss", value=0.8, at=at, split="train", source=MetricSource.CONTROLLER),
        ],
    )
    job = Job(
        kind="train",
        experiment_id=exp.id,
        inputs=JobInputs(workspace_sha256="0" * 64, seed=1),
        resources=Resources(cpu_s=1.5, wall_s=2.0, peak_rss_mb=30.0),
    )
    run = _experiment_run(exp, None, {exp.id: ("worker-2", "worker")}, [job, job])
    ms = 1796158576716
    assert run.points == [
        Point("dev/loss", 0.9, 0, ms),
        Point("dev/loss", 0.7, 1, ms),
        Point("agent/dev/loss", 0.1, 7, ms),
        Point("train/loss", 0.8, 0, ms),
    ]
    assert run.gauges == {
        "jobs/count": 2.0,
        "jobs/cpu_s": 3.0,
        "jobs/wall_s": 4.0,
        "jobs/peak_rss_mb": 30.0,
    }
    assert (run.tags["rsilab.actor"], run.tags["rsilab.role"]) == ("worker-2", "worker")
    assert run.status is RunStatus.RUNNING and run.end_ms is None
