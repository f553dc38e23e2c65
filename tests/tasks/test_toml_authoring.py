"""task.toml for authors: scorer direction, scorers from a file, every problem in one pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from rsilab.tasks import Sample, TaskLoadError, check_toml, get_scorer, load_toml, score_outputs
from tests.tasks.conftest import SECRET, write_small_task


def _with_scorer(folder: Path, lines: str) -> Path:
    """The small parity task with its benchmark's scorer lines replaced by ``lines``."""
    path = write_small_task(folder)
    path.write_text(path.read_text().replace('scorer = "accuracy"\n', lines))
    return path


def test_source_is_the_absolute_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_small_task(tmp_path / "t")
    monkeypatch.chdir(tmp_path)
    assert load_toml(Path("t/task.toml")).source == str(tmp_path.resolve() / "t" / "task.toml")


def test_omitted_direction_is_the_scorers(tmp_path: Path) -> None:
    path = _with_scorer(tmp_path / "t", 'scorer = "squared_error"\n')
    assert load_toml(path).benchmarks[0].higher_is_better is False


def test_a_direction_against_the_scorer_is_an_error(tmp_path: Path) -> None:
    path = _with_scorer(tmp_path / "t", 'scorer = "squared_error"\nhigher_is_better = true\n')
    with pytest.raises(TaskLoadError) as info:
        load_toml(path)
    assert info.value.problems == [
        "task.toml: benchmarks.0: higher_is_better = true disagrees with scorer "
        "'squared_error', for which lower is better; omit higher_is_better to take the "
        "scorer's direction"
    ]
    assert "docs/reference/task-toml.md" in info.value.hint


SCORING = """\
def closeness(sample, output):
    return 1.0 / (1.0 + abs(output - sample.target))

def distance(sample, output):
    if output == "crash":
        raise RuntimeError("boom")
    return abs(output - sample.target)
"""


def test_a_scorer_from_the_task_folder(tmp_path: Path) -> None:
    path = _with_scorer(
        tmp_path / "t", 'scorer = "scoring.py:distance"\nhigher_is_better = false\n'
    )
    (path.parent / "scoring.py").write_text(SCORING)
    bench = load_toml(path).benchmarks[0]
    assert bench.scorer == f"{(path.parent / 'scoring.py').resolve()}:distance"
    assert get_scorer(bench.scorer).higher_is_better is False
    sample = Sample(id="a", input={"x": 1}, target=1)
    good, crashed, missing = (
        score_outputs(bench.scorer, [sample], outputs)[0]
        for outputs in ({"a": 4}, {"a": "crash"}, {})
    )
    assert (good.score, good.valid) == (3.0, True)
    assert not crashed.valid and "RuntimeError: boom" in crashed.note
    assert not missing.valid


def test_two_tasks_functions_of_one_name_do_not_clash(tmp_path: Path) -> None:
    names = []
    for folder, body in (("a", "return 1.0"), ("b", "return 2.0")):
        path = _with_scorer(tmp_path / folder, 'scorer = "s.py:score"\nhigher_is_better = true\n')
        (path.parent / "s.py").write_text(f"def score(sample, output):\n    {body}\n")
        names.append(load_toml(path).benchmarks[0].scorer)
    sample = Sample(id="a", input=None, target=None)
    assert [get_scorer(n).fn(sample, 0).score for n in names] == [1.0, 2.0]


def test_a_scorer_file_outside_the_task_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "evil.py").write_text("def score(sample, output):\n    return 1.0\n")
    path = _with_scorer(tmp_path / "t", 'scorer = "../evil.py:score"\nhigher_is_better = true\n')
    with pytest.raises(TaskLoadError) as info:
        load_toml(path)
    (problem,) = info.value.problems
    assert problem.startswith("task.toml: benchmarks.0.scorer: scorer file ../evil.py is outside")


def test_a_scorer_file_needs_a_direction_and_a_function(tmp_path: Path) -> None:
    path = _with_scorer(tmp_path / "t", 'scorer = "scoring.py:closeness"\n')
    (path.parent / "scoring.py").write_text(SCORING)
    with pytest.raises(TaskLoadError, match="needs higher_is_better = true or false"):
        load_toml(path)
    path.write_text(path.read_text().replace(':closeness"', ':nothing"\nhigher_is_better = true'))
    with pytest.raises(TaskLoadError, match="defines no function 'nothing'"):
        load_toml(path)


def test_check_reports_four_independent_faults_in_one_pass(tmp_path: Path) -> None:
    path = write_small_task(tmp_path / "t")
    text = path.read_text().replace('scorer = "accuracy"', 'scorer = "accuracyy"')  # 1: spec
    path.write_text(text.replace('goal = "Say whether x is odd."\n', ""))  # 2: spec
    (path.parent / "data" / "accept.jsonl").write_text("")  # 3: splits
    harness_toml = path.parent / "harness" / "harness.toml"
    harness_toml.write_text(harness_toml.read_text().replace("predict.py", "predicts.py"))  # 4
    task, problems = check_toml(path, None, SECRET)
    errors = [str(p) for p in problems if p.severity == "error"]
    assert task is None
    assert len(errors) == 4, errors
    assert errors[0].startswith("error: task.toml: benchmarks.0.scorer: unknown scorer 'accuracyy'")
    assert errors[1] == "error: task.toml: (top level): a benchmark-guided task needs a goal"
    assert "error: harness: entry script predicts.py not found" in errors
    assert "error: benchmarks.parity: split accept is missing or empty" in errors
