"""``rsilab task list`` and ``rsilab task check`` as a person sees them."""

from __future__ import annotations

from pathlib import Path

from tests.cli.helpers import explain, rsilab
from tests.tasks.conftest import write_small_task


def test_list_shows_builtins_with_benchmarks_and_seconds() -> None:
    result = rsilab("task", "list")
    assert result.exit_code == 0, explain(result)
    for text in ("digits", "kernel", "synthetic", "accuracy (accuracy, target)", "(recorded)"):
        assert text in result.stdout


def test_check_a_sound_task_exits_0(tmp_path: Path) -> None:
    path = write_small_task(tmp_path / "t")
    result = rsilab("task", "check", path, "--no-probe", "--lab", tmp_path / "nolab")
    assert result.exit_code == 0, explain(result)
    assert "ok: task 'parity' has no errors" in result.stdout
    assert "no sandbox given: leak search skipped" in result.stdout
    # the closing line does not hide the warning above it
    assert "has no errors (1 warning(s) above: read them)" in result.stdout


def test_a_leak_search_cut_short_is_not_reported_as_clean(tmp_path: Path) -> None:
    path = write_small_task(tmp_path / "t")
    # 1 s cannot search the runtime the sandbox shows (torch alone is hundreds of MB)
    result = rsilab("task", "check", path, "--probe-seconds", "1", "--lab", tmp_path / "nolab")
    assert result.exit_code == 0, explain(result)
    assert "leak search stopped after 1 s" in result.stdout
    assert "raise --probe-seconds" in result.stdout
    assert "has no errors (1 warning(s) above: read them)" in result.stdout


def test_check_prints_every_problem_and_exits_2(tmp_path: Path) -> None:
    path = write_small_task(tmp_path / "t")
    (path.parent / "data" / "dev.jsonl").write_text("")
    (path.parent / "harness" / "predict.py").unlink()
    result = rsilab("task", "check", path, "--no-probe")
    assert result.exit_code == 2, explain(result)
    assert "split dev is missing or empty" in result.stdout
    assert "entry script predict.py not found" in result.stdout
    assert "2 error(s) found" in result.stdout


def test_check_a_malformed_file_lists_field_errors(tmp_path: Path) -> None:
    path = tmp_path / "task.toml"
    path.write_text('name = "x"\nharness = 5\nbudget = "wall=later"\n')
    result = rsilab("task", "check", path, "--no-probe")
    assert result.exit_code == 2, explain(result)
    # reported like every other problem, on stdout, in the same pass
    assert "task.toml: harness:" in result.stdout
    assert "'later' is not a duration" in result.stdout
    assert "task.toml: benchmarks: Field required" in result.stdout
    assert "Traceback" not in result.output


def test_check_uses_the_lab_secret_when_there_is_a_lab(tmp_path: Path) -> None:
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    result = rsilab("task", "check", "synthetic", "--no-probe", "--lab", lab)
    assert result.exit_code == 0, explain(result)
    assert (lab / "task-secret").exists()
    assert "secret of the lab" in result.stderr


def test_measuring_a_task_whose_runtime_is_missing_says_so_and_runs_nothing() -> None:
    from rsilab.cli.task import _measure
    from rsilab.tasks import get_task

    task = get_task("synthetic").model_copy(
        update={"runtime_requirements": ["no-such-package==0.0.1"]}
    )
    said = _measure(task)
    assert said.startswith("not measured: task 'synthetic' needs its own runtime"), said


def test_an_invalid_benchmark_gets_its_error_and_no_tolerance_warning(tmp_path: Path) -> None:
    path = write_small_task(tmp_path / "t")
    splits = ", ".join(f'{t} = "data/{t}.jsonl"' for t in ("train", "dev", "accept", "final"))
    with path.open("a") as toml:
        toml.write(
            f'\n[[benchmarks]]\nname = "shifted"\nscorer = "accuracy"\nhigher_is_better = "no"\n'
            f"tolerance = 0.03\nsplits = {{ {splits} }}\n"
        )
    result = rsilab("task", "check", path, "--no-probe", "--lab", tmp_path / "nolab")
    assert result.exit_code == 2, explain(result)
    assert "higher_is_better" in result.stdout
    # its tolerance is 0.03: before, the salvaged benchmark was warned of as if it were 0
    assert "tolerance 0" not in result.stdout


def test_check_names_the_rule_for_declared_data_sources(tmp_path: Path) -> None:
    result = rsilab("task", "check", "digits", "--no-probe", "--lab", tmp_path / "nolab")
    assert result.exit_code == 0, explain(result)
    assert "data sources: 1 declared (" in result.stdout
    assert "digits.csv.gz" in result.stdout
    assert "every job fails to open them" in result.stdout
    assert "search_local_datasets never offers" in result.stdout


def test_a_task_without_declared_sources_gets_no_rule_line(tmp_path: Path) -> None:
    path = write_small_task(tmp_path / "t")
    result = rsilab("task", "check", path, "--no-probe", "--lab", tmp_path / "nolab")
    assert result.exit_code == 0, explain(result)
    assert "data sources:" not in result.stdout
