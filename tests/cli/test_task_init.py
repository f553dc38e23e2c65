"""``rsilab task init``, ``task check --run`` and ``task list --json`` as a person uses them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rsilab.records import DataTier
from rsilab.sandbox.process import ProcessSandbox
from rsilab.tasks import load_toml, run_experiment
from tests.cli.helpers import explain, rsilab, run_refused


@pytest.mark.parametrize("kind", ["model", "harness"])
def test_init_writes_a_task_that_checks_and_runs(tmp_path: Path, kind: str) -> None:
    folder = tmp_path / "demo"
    made = rsilab("task", "init", folder, "--kind", kind)
    assert made.exit_code == 0, explain(made)
    for part in ("task.toml", "harness/harness.toml", "tests/test_harness.py"):
        assert (folder / part).is_file()
    checked = rsilab("task", "check", "--run", "--no-probe", folder, "--lab", tmp_path / "nolab")
    assert checked.exit_code == 0, explain(checked)
    assert "ok: task 'demo' has no errors" in checked.stdout
    assert "run: dev scores" in checked.stderr


def test_the_model_template_leaves_room_to_improve(tmp_path: Path) -> None:
    # the default config underfits: the better knobs named in the template's comments win
    assert rsilab("task", "init", tmp_path / "demo").exit_code == 0
    task = load_toml(tmp_path / "demo")
    assert task.default_config() == {"features": "linear", "lr": 0.1, "epochs": 5}
    box = ProcessSandbox()
    box.prepare()
    try:
        base = run_experiment(task, box, bytes(32), tier=DataTier.DEV).scores["accuracy"]
        config = tmp_path / "demo" / "harness" / "config.json"
        config.write_text(json.dumps({"features": "quadratic", "lr": 0.3, "epochs": 30}))
        tuned = run_experiment(task, box, bytes(32), tier=DataTier.DEV).scores["accuracy"]
    finally:
        box.close()
    assert base < 0.75 < 0.9 < tuned


@pytest.mark.parametrize("kind", ["model", "harness"])
def test_the_generated_tests_pass(tmp_path: Path, kind: str) -> None:
    assert rsilab("task", "init", tmp_path / "demo", "--kind", kind).exit_code == 0
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "demo/tests"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_init_refuses_a_folder_that_is_not_empty_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "notes.txt").write_text("mine")
    result = rsilab("task", "init", tmp_path / "demo")
    assert result.exit_code != 0
    assert result.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'demo'} exists and is not empty: pick a new NAME for task init"
    ]
    assert (tmp_path / "demo" / "notes.txt").read_text() == "mine"
    assert not (tmp_path / "demo" / "task.toml").exists()


def test_init_refuses_an_unknown_kind_and_a_bad_name(tmp_path: Path) -> None:
    assert rsilab("task", "init", tmp_path / "demo", "--kind", "agent").exit_code == 2
    bad = rsilab("task", "init", tmp_path / "Demo")
    assert bad.exit_code != 0
    assert "'Demo' is not a valid task name" in bad.stderr


def test_check_run_reports_a_failing_train_with_its_stderr(tmp_path: Path) -> None:
    assert rsilab("task", "init", tmp_path / "demo").exit_code == 0
    train = tmp_path / "demo" / "harness" / "train.py"
    train.write_text("import sys\nsys.exit('no data today')\n")
    result = rsilab("task", "check", "--run", "--no-probe", tmp_path / "demo")
    assert result.exit_code == 2, explain(result)
    assert "error: run: train failed: exit 1: no data today" in result.stdout


def test_check_help_shows_the_format() -> None:
    result = rsilab("task", "check", "--help")
    assert result.exit_code == 0
    for text in ("[[benchmarks]]", 'scorer = "accuracy"', "docs/reference/task-toml.md"):
        assert text in result.stdout


def test_a_bad_file_points_to_the_reference(tmp_path: Path) -> None:
    path = tmp_path / "task.toml"
    path.write_text('name = "x"\nharness = 5\n')
    result = rsilab("task", "check", path, "--no-probe")
    assert result.exit_code == 2, explain(result)
    assert "task.toml: harness:" in result.stdout
    assert "docs/reference/task-toml.md" in result.stderr


def test_list_json_names_targets_with_their_direction() -> None:
    result = rsilab("task", "list", "--json")
    assert result.exit_code == 0, explain(result)
    tasks = {t["name"]: t for t in json.loads(result.stdout)}
    assert tasks["digits"]["source"] == "builtin"
    assert {"name": "accuracy", "scorer": "accuracy", "higher_is_better": True} in tasks["digits"][
        "targets"
    ]


def test_run_refuses_a_start_config_outside_its_knobs_before_writing(tmp_path: Path) -> None:
    """The campaign starts (and searches) from harness/config.json: a value no knob allows
    is refused as `task check` names it, before anything is written."""
    task = tmp_path / "kt"
    assert rsilab("task", "init", task).exit_code == 0
    config = task / "harness" / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "epochs": 500}))
    _, error = run_refused(task, tmp_path / "lab")
    assert error == [
        "error: task 'kt': harness/config.json: knob epochs is 500, outside [1, 50] as "
        "search_space declares it; the campaign starts from this file, so set a declared value"
    ]
