"""Loading tasks from task.toml, Python files and names; malformed files are explained."""

from __future__ import annotations

from pathlib import Path

import pytest

from rsilab.records import DataTier
from rsilab.tasks import (
    FileSplits,
    PoolSplits,
    TaskLoadError,
    check_toml,
    load_manifest,
    load_task,
    load_toml,
)
from tests.tasks.conftest import write_small_task


def test_toml_task_resolves_paths_against_its_folder(small_task: Path) -> None:
    task = load_task(small_task)
    assert task.name == "parity"
    assert task.harness == small_task.parent / "harness"
    source = task.benchmarks[0].samples
    assert isinstance(source, FileSplits)
    assert source.files[DataTier.FINAL] == small_task.parent / "data/final.jsonl"
    assert task.budget.wall_s == 60
    assert task.source == str(small_task)
    assert load_task(small_task.parent).name == "parity"  # a folder holding task.toml


def test_a_task_file_saved_with_a_byte_order_mark_loads(small_task: Path) -> None:
    small_task.write_bytes(b"\xef\xbb\xbf" + small_task.read_bytes().replace(b"\n", b"\r\n"))
    assert load_toml(small_task).name == "parity"
    harness = small_task.parent / "harness" / "harness.toml"
    harness.write_bytes(b"\xef\xbb\xbf" + harness.read_bytes())
    assert load_manifest(harness.parent).predict == ["python", "predict.py"]


def test_check_names_a_task_file_that_is_not_toml_once(tmp_path: Path) -> None:
    path = tmp_path / "task.toml"
    path.write_text('name = "x"\nbogus = = 1\n')
    task, problems = check_toml(path, None, b"k" * 32)
    assert task is None
    assert [str(p) for p in problems] == [
        "error: task.toml: not valid TOML: Invalid value (at line 2, column 9)"
    ]


def test_pool_and_fractions(tmp_path: Path) -> None:
    path = write_small_task(tmp_path / "t")
    text = path.read_text().split("splits =")[0]
    path.write_text(
        text + 'pool = "data/train.jsonl"\nfractions = { train = 0.25, dev = 0.25, '
        "accept = 0.25, final = 0.25 }\n"
    )
    source = load_toml(path).benchmarks[0].samples
    assert isinstance(source, PoolSplits)
    assert source.pool == path.parent / "data/train.jsonl"
    assert source.fractions[DataTier.DEV] == 0.25


def test_malformed_toml_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "task.toml"
    path.write_text('name = "x"\nbenchmarks = [\n')
    with pytest.raises(TaskLoadError, match=r"task\.toml: not valid TOML") as info:
        load_toml(path)
    assert info.value.hint


def test_wrong_types_list_every_problem_with_toml_names(tmp_path: Path) -> None:
    path = tmp_path / "task.toml"
    path.write_text(
        """name = 3
harness = "h"
budget = "experiments=0,wall=soon"
[[benchmarks]]
name = "b"
scorer = "acc"
target = "maybe"
splits = { train = "t.jsonl" }
[[benchmarks]]
name = "c"
scorer = "accuracy"
pool = "p.jsonl"
fractions = { train = 1.0 }
"""
    )
    with pytest.raises(TaskLoadError) as info:
        load_toml(path)
    problems = info.value.problems
    text = "\n".join(problems)
    assert "task.toml: name: Input should be a valid string" in text
    assert "task.toml: benchmarks.0.scorer: unknown scorer 'acc'; known: absolute_error," in text
    assert "task.toml: benchmarks.0.target: Input should be a valid boolean" in text
    assert "task.toml: benchmarks.0.splits: missing split(s): dev, accept, final" in text
    assert "task.toml: benchmarks.1.fractions: missing fraction(s) for dev, accept, final" in text
    assert "task.toml: budget:" in text and "'soon' is not a duration" in text
    assert len(problems) >= 6
    assert f"{len(problems)} problem(s)" in str(info.value)


def test_a_benchmark_without_samples_is_a_missing_split(tmp_path: Path) -> None:
    path = tmp_path / "task.toml"
    path.write_text(
        'name = "x"\ngoal = "g"\nharness = "h"\n[[benchmarks]]\nname = "b"\n'
        'scorer = "accuracy"\ntarget = true\n'
    )
    with pytest.raises(TaskLoadError, match=r"benchmarks\.0\.splits: missing split"):
        load_toml(path)


def test_python_file_with_a_task(tmp_path: Path, small_task: Path) -> None:
    module = tmp_path / "mytask.py"
    module.write_text(
        "from pathlib import Path\n"
        "from rsilab import Task, task\n"
        "from rsilab.tasks import load_toml\n\n"
        "@task\n"
        "def parity_py() -> Task:\n"
        f"    loaded = load_toml(Path({str(small_task)!r}))\n"
        "    return loaded.model_copy(update={'name': 'parity_py'})\n"
    )
    assert load_task(module).name == "parity_py"
    assert load_task(f"{module}:parity_py").name == "parity_py"


def test_unknown_reference_lists_known_names() -> None:
    with pytest.raises(TaskLoadError) as info:
        load_task("no-such-task")
    assert "digits" in info.value.hint and "synthetic" in info.value.hint
    assert load_task("synthetic").source == "builtin"


def test_an_unknown_key_names_the_nearest_known_one(tmp_path: Path) -> None:
    """A typo was only 'Extra inputs are not permitted'; a key like no field gets no guess."""
    extra = (
        'descripton = "x"\n[[search_space]]\nname = "k"\ntype = "int"\nlwo = 1\nhigh = 3\n'
        "default = 2\nzzzz = 1\n"
    )
    path = write_small_task(tmp_path / "t", toml_extra=extra)
    path.write_text(path.read_text().replace("target = true", "target = true\ntolerence = 0.1"))
    with pytest.raises(TaskLoadError) as info:
        load_toml(path)
    said = "\n".join(info.value.problems)
    assert "search_space.0.lwo: Extra inputs are not permitted; did you mean 'low'?" in said
    tolerance = "benchmarks.0.tolerence: Extra inputs are not permitted; did you mean 'tolerance'?"
    assert tolerance in said
    assert "search_space.0.zzzz: Extra inputs are not permitted\n" in said + "\n"
