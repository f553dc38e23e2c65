"""A task's own job limits (``[limits]`` in task.toml): validated field by field, applied to
an experiment's jobs, raising (never lowering) the controller's, part of the fingerprint."""

from __future__ import annotations

from pathlib import Path

import pytest

from rsilab.tasks import TaskLoadError, load_toml
from tests.tasks.conftest import write_small_task

MIB = 1024 * 1024


def _with_limits(folder: Path, table: str) -> Path:
    path = write_small_task(folder)
    path.write_text(path.read_text() + f"\n[limits]\n{table}\n")
    return path


def test_a_task_sets_its_experiments_limits_and_the_controllers_scale(tmp_path: Path) -> None:
    table = "wall = 1500\ncpu = 100\nmemory = 6000\nprocesses = 32\noutput = 2\nfile = 64\n"
    table += "disk = 3000"
    task = load_toml(_with_limits(tmp_path / "t", table))
    mine = task.experiment_limits()
    assert (mine.wall_s, mine.cpu_s, mine.memory_mb, mine.processes) == (1500, 100, 6000, 32)
    assert (mine.output_bytes, mine.file_mb, mine.disk_mb) == (2 * MIB, 64, 3000)
    theirs = task.controller_limits()
    assert theirs.wall_s == 2250 and theirs.memory_mb == 12000 and theirs.disk_mb == 3000
    assert theirs.cpu_s == 3600  # lowered for experiments: the controller keeps its default
    assert (theirs.processes, theirs.output_bytes, theirs.file_mb) == (128, 8 * MIB, 512)
    for name in ("wall_s", "cpu_s", "memory_mb", "processes", "output_bytes", "file_mb"):
        assert getattr(theirs, name) >= getattr(mine, name), name


def test_without_limits_the_defaults_hold(tmp_path: Path) -> None:
    task = load_toml(write_small_task(tmp_path / "t"))
    mine, theirs = task.experiment_limits(), task.controller_limits()
    assert (mine.wall_s, mine.cpu_s, mine.memory_mb, mine.disk_mb) == (600, 1200, 2048, 1024)
    assert (theirs.wall_s, theirs.cpu_s, theirs.memory_mb) == (900, 3600, 4096)


def test_every_bad_limit_is_one_line_naming_it(tmp_path: Path) -> None:
    path = _with_limits(
        tmp_path / "t",
        'walll = 60\nmemory = 0\ncpu = -5\noutput = 5000\nprocesses = true\ndisk = "big"',
    )
    with pytest.raises(TaskLoadError) as info:
        load_toml(path)
    problems = sorted(info.value.problems)
    assert problems == [
        "task.toml: limits.cpu: -5 is not positive: give the CPU seconds a job may use, above 0",
        "task.toml: limits.disk: 'big' is not a number",
        "task.toml: limits.memory: 0 is not positive: "
        "give the MiB of memory a job may use, above 0",
        "task.toml: limits.output: 5000 MiB is above the most the lab allows one job "
        "(1,024 MiB): give at most that",
        "task.toml: limits.processes: True is not a number",
        "task.toml: limits.walll: Extra inputs are not permitted; did you mean 'wall'?",
    ]


def test_the_fingerprint_changes_with_the_limits(tmp_path: Path) -> None:
    path = write_small_task(tmp_path / "t")
    base = path.read_text()

    def digest(extra: str) -> str:
        path.write_text(base + extra)
        return load_toml(path).ref().digest

    plain = digest("")
    assert digest("\n[limits]\n") == plain  # an empty table: the task as it was
    wall = digest("\n[limits]\nwall = 601\n")
    assert wall != plain and digest("\n[limits]\nwall = 602\n") not in (plain, wall)
    assert digest("\n[limits]\nwall = 601\n") == wall
