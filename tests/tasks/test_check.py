"""check_task finds each planted problem, including private data readable from a sandbox."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from rsilab.records import DataTier
from rsilab.sandbox.base import Sandbox, SandboxUnavailable
from rsilab.tasks import (
    TIERS,
    Problem,
    Sample,
    Trap,
    TrapKind,
    check_run,
    check_task,
    get_task,
    load_task,
    plant_traps,
    read_jsonl,
    write_jsonl,
)
from rsilab.tasks._probe import slices
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


def test_an_item_that_lost_its_target_is_named(small_task: Path, secret: bytes) -> None:
    dev = small_task.parent / "data" / "dev.jsonl"
    lines = dev.read_text().splitlines()
    item = json.loads(lines[3])
    del item["target"]
    lines[3] = json.dumps(item)
    dev.write_text("\n".join(lines) + "\n")
    text = _messages(check_task(load_task(small_task), None, secret))
    # 6 items per tier, 4 tiers: one of 24 lost its target
    assert f"1 of 24 items have no \"target\" (first: id 'dev-3' in {dev})" in text
    # a benchmark none of whose items has a target (its scorer needs none) is left alone
    data = small_task.parent / "data"
    for tier in ("train", "dev", "accept", "final"):
        items = [json.loads(x) for x in (data / f"{tier}.jsonl").read_text().splitlines()]
        rows = [{"id": i["id"], "input": i["input"]} for i in items]
        (data / f"{tier}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert "target" not in _messages(check_task(load_task(small_task), None, secret))


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
    assert "parity final item s-" in text
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


def test_a_non_target_at_tolerance_zero_is_warned_of(small_task: Path, secret: bytes) -> None:
    task = load_task(small_task)
    target = task.benchmarks[0]
    strict = target.model_copy(update={"name": "strict", "target": False})
    lenient = target.model_copy(update={"name": "lenient", "target": False, "tolerance": 0.05})
    task = task.model_copy(update={"benchmarks": [target, strict, lenient]})
    problems = check_task(task, None, secret)
    warnings = _messages(problems, "warning")
    assert "benchmarks.strict: a non-target with tolerance 0" in warnings
    assert "set tolerance to the largest drop you accept" in warnings
    assert "benchmarks.lenient:" not in warnings
    assert "benchmarks.parity:" not in warnings  # a target has no tolerance
    assert "tolerance" not in _messages(problems)  # a warning, never an error


def test_a_model_missing_from_the_host_is_an_error(small_task: Path, secret: bytes) -> None:
    task = load_task(small_task).model_copy(update={"model": small_task.parent / "gone"})
    assert f"model: {small_task.parent / 'gone'} does not exist on this host" in _messages(
        check_task(task, None, secret)
    )


@pytest.mark.parametrize("name", ["digits", "kernel", "policy", "synthetic"])
def test_builtins_are_sound(name: str, secret: bytes) -> None:
    assert _messages(check_task(get_task(name), None, secret)) == ""


_SENTENCE = (
    "the quick survey of harbour towns found that the ferry timetable printed on yellow card "
    "and pinned beside the ticket window had not changed since it was first recorded by the "
    "county archivist"
)


def _text(seed: int) -> str:
    words = _SENTENCE.split(" ")
    random.Random(seed).shuffle(words)
    return " ".join(words)


def test_probe_finds_a_slice_of_a_private_text(
    small_task: Path, sandbox: Sandbox, secret: bytes
) -> None:
    """A bare middle slice of a private text, re-wrapped like source code, is found: the check
    can fail on text rebuilt from (or copied out of) a data source, not only on whole items."""
    data = small_task.parent / "data"
    for t, tier in enumerate(TIERS):
        rows = [
            Sample(
                id=f"{tier.value}-{i}",
                input={"text": _text(100 * t + i)},
                target=i % 2,
            )
            for i in range(6)
        ]
        write_jsonl(data / f"{tier.value}.jsonl", rows)
    task = load_task(small_task)
    assert _messages(check_task(task, sandbox, secret, probe_roots=HERE_ONLY)) == ""
    final = read_jsonl(data / "final.jsonl")
    slices_of = {s.id: slices(s.input) for s in final}
    assert all(len(found) == 1 and 40 <= len(found[0]) <= 60 for found in slices_of.values())
    text = final[3].input["text"]  # type: ignore[index]
    middle = slices_of[final[3].id][0]
    assert middle in text and len(middle) < len(text)
    words = middle.split(" ")
    wrapped = " ".join(words[:4]) + "\n        " + " ".join(words[4:])
    (task.harness / "notes.py").write_text(f'def f():\n    """...{wrapped}..."""\n')
    problems = check_task(task, sandbox, secret, probe_roots=HERE_ONLY, probe_seconds=20)
    (hit,) = [p for p in problems if p.severity == "error"]
    assert hit.message.startswith(("parity accept item s-", "parity final item s-"))
    assert hit.message.endswith("notes.py (content)")


@pytest.mark.parametrize(
    ("setting", "line"),
    [
        ({"lr": 5.0}, "knob lr is 5.0, outside [0.001, 1] as search_space declares it"),
        ({"epochs": 5.5}, "knob epochs is 5.5, not an integer as search_space declares it"),
        ({"epochs": True}, "knob epochs is True, not an integer as search_space declares it"),
        ({"features": "cubic"},
         "knob features is 'cubic', not one of ['linear', 'quadratic'] as search_space"),
    ],
)  # fmt: skip
def test_a_harness_config_value_outside_its_knob_is_an_error(
    tmp_path: Path, secret: bytes, setting: dict[str, object], line: str
) -> None:
    """Before, `task check` passed and the campaign started (and searched) from the value."""
    from rsilab.tasks._init import init_task

    init_task(tmp_path / "kt")
    config = tmp_path / "kt" / "harness" / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), **setting}))
    task = load_task(str(tmp_path / "kt" / "task.toml"))
    assert f"harness/config.json: {line}" in _messages(check_task(task, None, secret))


def test_a_harness_config_value_other_than_the_declared_default_is_warned_of(
    tmp_path: Path, secret: bytes
) -> None:
    from rsilab.tasks._init import init_task

    init_task(tmp_path / "kt")
    config = tmp_path / "kt" / "harness" / "config.json"
    task = load_task(str(tmp_path / "kt" / "task.toml"))
    assert "knob" not in _messages(check_task(task, None, secret), "warning")
    config.write_text(json.dumps({**json.loads(config.read_text()), "epochs": 40}))
    problems = check_task(task, None, secret)
    assert "knob" not in _messages(problems)
    assert (
        "harness/config.json: knob epochs is 40 but search_space declares the default 5; the "
        "campaign starts from this file's value: make them agree"
    ) in _messages(problems, "warning")


def test_a_config_problem_names_the_harness_folder_the_task_uses(
    tmp_path: Path, secret: bytes
) -> None:
    from rsilab.tasks._init import init_task

    init_task(tmp_path / "kt")
    (tmp_path / "kt" / "harness").rename(tmp_path / "kt" / "my harness")
    toml = tmp_path / "kt" / "task.toml"
    toml.write_text(toml.read_text().replace('harness = "harness"', 'harness = "my harness"'))
    config = tmp_path / "kt" / "my harness" / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "epochs": 40}))
    problems = check_task(load_task(str(toml)), None, secret)
    assert "warning: my harness/config.json: knob epochs is 40" in _messages(problems, "warning")


def test_a_config_in_another_format_is_left_to_the_runner(tmp_path: Path, secret: bytes) -> None:
    """A YAML config is the harness's own business (the built-in runner says it cannot edit
    it): the knob check judges JSON objects only, and says nothing here."""
    from rsilab.tasks._init import init_task

    init_task(tmp_path / "kt")
    (tmp_path / "kt" / "harness" / "config.json").write_text("lr: 5.0\nepochs: 500\n")
    problems = check_task(load_task(str(tmp_path / "kt" / "task.toml")), None, secret)
    assert "config.json" not in _messages(problems) + _messages(problems, "warning")


@pytest.mark.parametrize(
    ("program", "said"),
    [
        (
            "import sys\nsys.stderr.write('x' * (9 * 1024 * 1024))\n",
            "predict on parity/dev failed: killed: it printed more than 8 MiB on stdout or stderr:"
            " print less, or write the log to a file",
        ),
        ("import sys\nsys.exit(3)\n", "failed: exit 3 (it wrote nothing on stderr)"),
    ],
)
def test_a_failed_job_says_which_limit_ended_it_and_its_value(
    small_task: Path, sandbox: Sandbox, secret: bytes, program: str, said: str
) -> None:
    (small_task.parent / "harness" / "predict.py").write_text(program)
    problems, outcome = check_run(load_task(small_task), sandbox, secret)
    assert outcome is None
    assert said in _messages(problems)
