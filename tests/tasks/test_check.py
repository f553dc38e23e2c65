"""check_task finds each planted problem, including private data readable from a sandbox."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rsilab.records import DataTier
from rsilab.sandbox.base import Sandbox, SandboxUnavailable
from rsilab.tasks import Problem, Trap, TrapKind, check_task, get_task, load_task, plant_traps
from tests.tasks.conftest import read_lines

HERE_ONLY = (".",)


def _messages(problems: list[Problem], severity: str = "error") -> str:
    return "\n".join(str(p) for p in problems if p.severity == severity)


def test_a_sound_task_has_no_errors(small_task: Path, sandbox: Sandbox, secret: bytes) -> None:
    problems = check_task(load_task(small_task), sandbox, secret, probe_roots=HERE_ONLY)
    assert _messages(problems) == ""


def test_split_problems(small_task: Path, secret: bytes) -> None:
    data = small_task.parent / "data"
    (data / "dev.jsonl").write_text("")
    (data / "accept.jsonl").unlink()
    train = (data / "train.jsonl").read_text()
    (data / "final.jsonl").write_text(train.replace('"train-0"', '"leaked"'))
    text = _messages(check_task(load_task(small_task), None, secret))
    assert "benchmarks.parity: split dev is missing or empty" in text
    assert "split accept: " in text and "accept.jsonl: cannot read" in text
    (data / "accept.jsonl").write_text(train.replace("train-", "acc-"))
    text = _messages(check_task(load_task(small_task), None, secret))
    assert "6 accept item(s) also in train/dev (same id or input)" in text
    assert "6 final item(s) also in train/dev" in text


def test_harness_problems(small_task: Path, secret: bytes) -> None:
    harness = small_task.parent / "harness"
    (harness / "harness.toml").write_text(
        '[harness]\ntrain = "python train.py"\nconfig = "config.json"\n'
    )
    text = _messages(check_task(load_task(small_task), None, secret))
    assert "harness.toml names no predict command" in text
    assert "entry script train.py not found" in text
    assert "config file config.json not found" in text
    (harness / "harness.toml").write_text("[harness\n")
    assert "not valid TOML" in _messages(check_task(load_task(small_task), None, secret))
    shutil.rmtree(harness)
    assert "is not a folder" in _messages(check_task(load_task(small_task), None, secret))


def test_traps_data_sources_and_no_sandbox(small_task: Path, secret: bytes) -> None:
    trap = Trap(kind=TrapKind.EDITABLE_EVALUATOR, path="eval.py", description="d", detected_by="x")
    task = load_task(small_task).model_copy(
        update={"traps": [trap], "data_sources": [Path("/no/such/raw.csv")]}
    )
    problems = check_task(task, None, secret)
    assert "traps: editable_evaluator: eval.py not in the harness" in _messages(problems)
    warnings = _messages(problems, "warning")
    assert "/no/such/raw.csv does not exist on this host" in warnings
    assert "no sandbox given: leak search skipped" in warnings


def test_probe_finds_a_planted_leak_and_a_visible_data_source(
    tmp_path: Path, small_task: Path, sandbox: Sandbox, secret: bytes
) -> None:
    raw = tmp_path / "raw-source.csv"
    raw.write_text("the raw data\n")
    leak = Trap(
        kind=TrapKind.LEAKED_TEST_DATA,
        path="data/test_labels.jsonl",
        description="d",
        detected_by="x",
        planted=True,
    )
    task = load_task(small_task).model_copy(update={"traps": [leak], "data_sources": [raw]})
    written = plant_traps(task, task.harness, secret)
    assert [p.name for p in written] == ["test_labels.jsonl"]
    assert len(read_lines(written[0])) == 6
    problems = check_task(task, sandbox, secret, probe_roots=HERE_ONLY, probe_seconds=20)
    text = _messages(problems)
    assert "data/test_labels.jsonl (content)" in text
    assert "parity item final-" in text
    assert f"declared data source readable from inside the sandbox at {raw}" in text


def test_probe_finds_the_lab_secret(small_task: Path, sandbox: Sandbox, secret: bytes) -> None:
    (small_task.parent / "harness" / "notes.txt").write_text(f"key {secret.hex()}\n")
    problems = check_task(load_task(small_task), sandbox, secret, probe_roots=HERE_ONLY)
    assert "lab secret readable from inside the sandbox" in _messages(problems)


def test_planted_leak_holds_the_final_tier(tmp_path: Path, secret: bytes) -> None:
    task = get_task("synthetic")
    workspace = tmp_path / "ws"
    shutil.copytree(task.harness, workspace)
    (path,) = plant_traps(task, workspace, secret)
    assert path == workspace / "data/test_samples.jsonl"
    from rsilab.tasks import make_splits

    final = make_splits(task, task.benchmarks[0], secret)[DataTier.FINAL]
    assert [row["id"] for row in read_lines(path)] == [s.id for s in final]


def test_bwrap_hides_the_digits_source(secret: bytes) -> None:
    from rsilab.sandbox.bwrap import BwrapSandbox

    box = BwrapSandbox()
    try:
        box.prepare()
    except SandboxUnavailable as exc:
        pytest.skip(f"bubblewrap unavailable here: {exc}")
    task = get_task("digits")
    assert task.data_sources and task.data_sources[0].exists()
    try:
        problems = check_task(task, box, secret, probe_roots=HERE_ONLY, probe_seconds=20)
    finally:
        box.close()
    assert _messages(problems) == ""


@pytest.mark.parametrize("name", ["digits", "kernel", "synthetic"])
def test_builtins_are_sound(name: str, secret: bytes) -> None:
    assert _messages(check_task(get_task(name), None, secret)) == ""
