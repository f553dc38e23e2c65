"""``rsilab export mlflow --follow``: copying a campaign while it runs, in a real campaign run
by another process, to its end; and stopping on request (Ctrl-C) while it still runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from mlflow import MlflowClient

from rsilab.export import ExportResult, export_mlflow, follow_mlflow
from rsilab.records import Campaign, Experiment, MetricSource
from rsilab.store import Lab
from tests.cli.helpers import explain, rsilab
from tests.export.conftest import MLFLOW_WARNINGS

pytestmark = MLFLOW_WARNINGS

DEADLINE_S = 240.0


def _environment(key_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RSILAB_", "MLFLOW_"))}
    env.update(
        RSILAB_KEY_DIR=str(key_dir), RSILAB_SANDBOX="process", MLFLOW_DISABLE_TELEMETRY="true"
    )
    return env


def _wait_for(what: str, ready: Callable[[], bool], poll_s: float = 0.2) -> None:
    """Poll ``ready()`` until true, within the deadline."""
    end = time.monotonic() + DEADLINE_S
    while not ready():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(poll_s)


def _campaign_id(lab: Path) -> str | None:
    with Lab.open(lab) as opened:
        found = opened.store.query_as(Campaign)
    return found[0].id if found else None


def test_follow_copies_a_running_campaign_to_its_end(
    tmp_path: Path, tracking_uri: str, isolated_environment: Path
) -> None:
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    argv = ["run", "synthetic", "--budget", "experiments=4", "--seed", "2", "--lab", str(lab)]
    log = tmp_path / "run.log"
    with log.open("w") as sink:  # the child holds its own copy of the descriptor
        runner = subprocess.Popen(
            [sys.executable, "-m", "rsilab", *argv],
            env=_environment(isolated_environment),
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    try:
        _wait_for("the campaign to start", lambda: _campaign_id(lab) is not None)
        campaign_id = _campaign_id(lab)
        assert campaign_id is not None
        seen: list[ExportResult] = []
        with Lab.open(lab) as opened:
            last = follow_mlflow(
                opened.store,
                campaign_id,
                threading.Event(),
                tracking_uri=tracking_uri,
                interval_s=0.2,
                on_export=seen.append,
            )
        assert runner.wait(timeout=DEADLINE_S) == 0, log.read_text()
    finally:
        if runner.poll() is None:
            runner.kill()
    states = [r.campaign_state for r in seen]
    assert states[0] == "running" and states[-1] == "finished" and len(seen) >= 2, states
    assert last is seen[-1] and "running" not in states[states.index("finished") :]
    # The follow left a whole copy: a plain export now finds every run and writes nothing.
    with Lab.open(lab) as opened:
        again = export_mlflow(opened.store, campaign_id, tracking_uri=tracking_uri)
        experiments = opened.store.query_as(Experiment, campaign_id=campaign_id)
    assert (again.created, again.values_logged) == (0, 0)
    assert again.run_ids == last.run_ids
    client = MlflowClient(tracking_uri)
    assert client.get_run(again.parent_run_id).info.status == "FINISHED"
    assert len(experiments) == 4
    for exp in experiments:
        logged = [
            m.value
            for m in exp.metrics
            if m.name == "quality" and m.source is MetricSource.CONTROLLER
        ]
        history = client.get_metric_history(again.run_ids[exp.id], "dev/quality")
        assert [m.value for m in history] == logged  # each value once, however many passes


def test_ctrl_c_ends_a_follow_of_a_campaign_that_goes_on(
    tmp_path: Path, tracking_uri: str, isolated_environment: Path
) -> None:
    """A campaign opened for a host client stays running; Ctrl-C ends the follow (exit 0)
    after its export, and the campaign's run is left RUNNING, as the campaign is."""
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    made = rsilab("campaign", "new", "synthetic", "--lab", lab)
    assert made.exit_code == 0, explain(made)
    campaign_id = made.stdout.strip()
    argv = ["export", "mlflow", campaign_id, "--follow", "--interval", "0.2"]
    follower = subprocess.Popen(
        [sys.executable, "-m", "rsilab", *argv, "--tracking-uri", tracking_uri, "--lab", str(lab)],
        env=_environment(isolated_environment),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        client = MlflowClient(tracking_uri)

        def parent_exported() -> bool:
            experiment = client.get_experiment_by_name("rsilab-synthetic")
            query = f"tags.`rsilab.record_id` = '{campaign_id}'"
            return experiment is not None and bool(
                client.search_runs([experiment.experiment_id], query)
            )

        _wait_for("the first export", parent_exported)
        follower.send_signal(signal.SIGINT)
        out, err = follower.communicate(timeout=DEADLINE_S)
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 0, err
    lines = out.splitlines()
    # One export (the ledger did not move after it) and where to see the runs.
    assert len(lines) == 2 and lines[1].startswith("see the runs: mlflow ui"), out
    assert lines[0].startswith(f"{campaign_id} [running] at ledger event"), out
    experiment = client.get_experiment_by_name("rsilab-synthetic")
    assert experiment is not None
    query = f"tags.`rsilab.record_id` = '{campaign_id}'"
    (run,) = client.search_runs([experiment.experiment_id], query)
    assert run.info.status == "RUNNING"
