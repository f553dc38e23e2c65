"""The Worker's hands on a workspace: the config it writes keeps each knob's declared type, and
a config file it could not edit is refused before a campaign starts, saying what is wrong."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from rsilab.errors import UserError
from rsilab.orchestrator.builtin.runner import run_campaign
from rsilab.orchestrator.builtin.worker._agent import check_config_file
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


def _refusal(tmp_path: Path, write: Callable[[Path], object]) -> UserError:
    """What check_config_file says of a task whose ``params.yaml`` ``write`` made."""
    task = regression_task(tmp_path / "task", config="params.yaml")
    path = task.harness / "params.yaml"
    path.unlink()
    write(path)
    with pytest.raises(UserError) as caught:
        check_config_file(task)
    return caught.value


@pytest.mark.parametrize(
    ("make", "reason"),
    [(Path.mkdir, "Is a directory"), (lambda path: None, "No such file or directory")],
)
def test_a_config_file_that_cannot_be_read_is_named_with_the_reason(
    tmp_path: Path, make: Callable[[Path], object], reason: str
) -> None:
    refused = _refusal(tmp_path, make)
    assert refused.message == f"the harness's config file params.yaml could not be read: {reason}"
    path = tmp_path / "task" / "harness" / "params.yaml"
    assert refused.hint == f"make {path} a file this user can read, then run again"


def test_a_config_file_that_is_not_utf8_is_named_with_the_byte(tmp_path: Path) -> None:
    refused = _refusal(tmp_path, lambda path: path.write_bytes(b'{"w": "\xff"}'))
    assert refused.message == (
        "the harness's config file params.yaml is not UTF-8 text (byte 0xff at offset 7)"
    )
    path = tmp_path / "task" / "harness" / "params.yaml"
    assert refused.hint == f"save {path} as UTF-8, then run again"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("w: 0.2\n", "it is not JSON: Expecting value at line 1 column 1"),
        ('{"w": 0.2,}', "it is not JSON: Expecting property name enclosed in double quotes at "
         "line 1 column 11"),
        ("[0.2]", "it is JSON, but an array, not an object"),
        ("0.2", "it is JSON, but a number, not an object"),
        ("true", "it is JSON, but true, not an object"),
    ],
)  # fmt: skip
def test_a_config_file_with_no_json_object_says_what_it_holds(
    tmp_path: Path, text: str, why: str
) -> None:
    refused = _refusal(tmp_path, lambda path: path.write_text(text))
    assert refused.message == (
        f"the harness's config file params.yaml holds no JSON object ({why}); the built-in "
        "policy reads and writes config files as JSON (JSON is valid YAML too): write it as a "
        "JSON object"
    )
    path = tmp_path / "task" / "harness" / "params.yaml"
    assert refused.hint == f"edit {path} into a JSON object, then run again"
