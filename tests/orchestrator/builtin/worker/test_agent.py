"""The Worker's hands on a workspace: the config it writes keeps each knob's declared type."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rsilab.orchestrator.builtin.runner import run_campaign
from rsilab.records import Experiment, ExperimentState
from rsilab.store import Lab
from rsilab.tasks import Budget
from tests.orchestrator.builtin.tiny_tasks import regression_task

STRICT = """\
import json, sys
w = json.load(open(CONFIG))["w"]
if not isinstance(w, float):
    sys.exit(f"w is {w!r}, not a float")
"""


@pytest.fixture(autouse=True)
def _process_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")


def test_a_float_knob_at_a_whole_value_is_written_as_a_float(lab: Lab, tmp_path: Path) -> None:
    """The records keep JSON canonically, where 1.0 is 1: a config rebuilt from them (the
    race's re-runs of the reference) was written ``"w": 1``, and a harness that checks its
    types failed those runs."""
    task = regression_task(tmp_path / "task", trains=False)
    harness = task.harness
    (harness / "config.json").write_text(json.dumps({"w": 1.0}))
    predict = harness / "predict.py"
    head, _, rest = predict.read_text().partition("SCALE = 1.0\n")
    predict.write_text(head + "SCALE = 1.0\n" + STRICT + rest)
    result = run_campaign(lab, task, budget=Budget(experiments=10), seed=1)
    runs = lab.store.query_as(Experiment, campaign_id=result.campaign_id)
    assert runs and all(e.state is ExperimentState.SUCCEEDED for e in runs), [
        (e.config, e.state) for e in runs
    ]
