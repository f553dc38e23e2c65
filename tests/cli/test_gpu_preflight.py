"""``rsilab run`` refuses a task whose harness needs GPUs on this machine, which has none, and,
where stand-in GPU nodes make it look as if it had them, because the jobs' torch is a CPU
build."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.cli.helpers import explain, rsilab, run_refused
from tests.sandbox.gpu_nodes import make_dev_root


@pytest.mark.parametrize("gpus", [1, 2])
def test_a_gpu_task_is_refused_here_in_one_line(tmp_path: Path, gpus: int) -> None:
    assert shutil.which("nvidia-smi") is None  # the fact this test stands on: no GPU here
    task = tmp_path / "gputask"
    assert rsilab("task", "init", task).exit_code == 0
    manifest = task / "harness" / "harness.toml"
    manifest.write_text(manifest.read_text() + f"gpus = {gpus}\n")
    ran, error = run_refused(task, tmp_path / "lab")  # before anything was written
    assert error == [
        f"error: task 'gputask' needs {gpus} GPU(s) (gpus = {gpus} in harness.toml) but this "
        "machine has 0: nvidia-smi missing, 0 nvidia device node(s) under /dev"
    ]
    assert "set gpus = 0" in ran.stderr


def test_a_gpu_harness_passes_task_check(tmp_path: Path) -> None:
    # gpus is part of the manifest: a checked task may declare it (it runs where GPUs are)
    task = tmp_path / "gputask"
    assert rsilab("task", "init", task).exit_code == 0
    manifest = task / "harness" / "harness.toml"
    manifest.write_text(manifest.read_text() + "gpus = 1\n")
    checked = rsilab("task", "check", "--no-probe", task, "--lab", tmp_path / "nolab")
    assert checked.exit_code == 0, explain(checked)


def test_check_run_says_the_gpus_are_missing(tmp_path: Path) -> None:
    task = tmp_path / "gputask"
    assert rsilab("task", "init", task).exit_code == 0
    manifest = task / "harness" / "harness.toml"
    manifest.write_text(manifest.read_text() + "gpus = 1\n")
    checked = rsilab("task", "check", "--run", "--no-probe", task, "--lab", tmp_path / "nolab")
    assert checked.exit_code == 2, explain(checked)
    assert "run: could not start: the job needs 1 GPU(s); this machine has 0" in checked.stdout
    # the error is the run's, not task.toml's: the hint says so
    assert "hint: the run's errors come from the task's jobs" in checked.stderr
    assert "task-toml.md" not in checked.stderr


def test_a_gpu_task_whose_jobs_torch_is_a_cpu_build_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stand-in nodes pass the GPU count; the runtime's torch (the pinned CPU build) does not:
    before, its jobs would have trained on the CPU and nothing said so."""
    monkeypatch.setenv("RSILAB_GPU_DEV_ROOT", str(make_dev_root(tmp_path, ("nvidia0",))))
    task = tmp_path / "gputask"
    assert rsilab("task", "init", task).exit_code == 0
    manifest = task / "harness" / "harness.toml"
    manifest.write_text(manifest.read_text() + "gpus = 1\n")
    ran, error = run_refused(task, tmp_path / "lab")
    assert len(error) == 1
    assert error[0].startswith(
        "error: task 'gputask' needs 1 GPU(s) (gpus = 1 in harness.toml) but its jobs' torch 2."
    )
    assert error[0].endswith("is a CPU build: its jobs could not use a GPU")
    assert "rsilab runtime adopt PYTHON --task gputask" in ran.stderr
