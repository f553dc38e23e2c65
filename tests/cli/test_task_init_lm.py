"""``rsilab task init NAME --kind lm --model PATH``: a user's own model folder, post-trained by
the posttrain harness. The model is a tiny one built here (tests/tasks/lm_model.py)."""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rsilab.sandbox import BwrapSandbox, ProcessSandbox, Sandbox
from rsilab.tasks import check_run, load_task
from tests.cli.helpers import explain, rsilab
from tests.sandbox.helpers import bwrap_problem, passable_folder
from tests.tasks.lm_model import make_model_folder

POSTTRAIN_HARNESS = Path(__file__).parents[2] / "src/rsilab/tasks/builtin/posttrain/harness"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_model_folder(tmp_path_factory.mktemp("user") / "my-model")


def _init(tmp_path: Path, model: Path) -> Path:
    made = rsilab("task", "init", tmp_path / "mylm", "--kind", "lm", "--model", model)
    assert made.exit_code == 0, explain(made)
    return tmp_path / "mylm"


def test_init_lm_writes_the_posttrain_harness_around_the_model(tmp_path: Path, model: Path) -> None:
    task = _init(tmp_path, model)
    for name in ("train.py", "predict.py", "common.py", "harness.toml"):
        assert filecmp.cmp(task / "harness" / name, POSTTRAIN_HARNESS / name, shallow=False)
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        assert filecmp.cmp(task / "harness/base_model" / name, model / name, shallow=False)
    config = json.loads((task / "harness/config.json").read_text())
    assert config["base_model"] == "base_model"
    assert config["max_train_examples"] == 0, "posttrain's training budget is not the user's"
    spec = load_task(str(task / "task.toml"))
    assert spec.name == "mylm"
    assert spec.runtime_requirements == [
        "transformers==5.24.0",
        "tokenizers==0.23.3",
        "peft==0.21.2",
    ]
    assert [b.name for b in spec.benchmarks] == ["arith", "reverse", "choice"]
    readme = (task / "README.md").read_text()
    assert "{{" not in readme and "# mylm:" in readme
    for path in sorted(task.rglob("*")):
        inside = path.relative_to(task).as_posix()
        if path.is_file() and inside != "README.md" and not inside.startswith("harness/base_"):
            assert f"`{inside}`" in readme, f"README.md has no line on {inside}"
    checked = rsilab("task", "check", "--no-probe", task, "--lab", tmp_path / "nolab")
    assert checked.exit_code == 0, explain(checked)


def test_init_lm_refuses_what_it_cannot_use(tmp_path: Path, model: Path) -> None:
    bare = rsilab("task", "init", tmp_path / "a", "--kind", "lm")
    assert bare.exit_code != 0 and "the lm kind needs --model PATH" in bare.stderr
    other = rsilab("task", "init", tmp_path / "b", "--model", model)
    assert other.exit_code != 0 and "--model PATH goes with --kind lm" in other.stderr
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    (pickled / "config.json").write_text('{"model_type": "llama"}')
    (pickled / "tokenizer.json").write_text("{}")
    (pickled / "pytorch_model.bin").write_bytes(b"\x80\x02")
    refused = rsilab("task", "init", tmp_path / "c", "--kind", "lm", "--model", pickled)
    assert refused.exit_code != 0 and "only pickled *.bin weights" in refused.stderr
    assert not (tmp_path / "c").exists(), "refused before anything was written"


def _copy_of(model: Path, where: Path) -> Path:
    return Path(shutil.copytree(model, where))


def test_init_lm_refuses_broken_links_and_weights_and_leaves_nothing_behind(
    tmp_path: Path, model: Path
) -> None:
    """A link to nothing and weights that are not safetensors are refused before anything
    is written; a file that cannot be copied (a named pipe) is refused after writing began,
    and what was written is removed, so the same NAME can be used again."""
    dangling = _copy_of(model, tmp_path / "dangling")
    (dangling / "notes.txt").symlink_to(tmp_path / "gone.txt")
    ran = rsilab("task", "init", tmp_path / "t1", "--kind", "lm", "--model", dangling)
    assert ran.exit_code == 2, explain(ran)
    assert f"notes.txt is a link to {tmp_path / 'gone.txt'}, which does not exist" in ran.stderr
    assert not (tmp_path / "t1").exists()

    garbage = _copy_of(model, tmp_path / "garbage")
    (garbage / "model.safetensors").write_text("garbage")
    ran = rsilab("task", "init", tmp_path / "t2", "--kind", "lm", "--model", garbage)
    assert ran.exit_code == 2, explain(ran)
    length = int.from_bytes(b"garbage", "little")  # its first 8 bytes: all 7 of them
    error = " ".join(ran.stderr.split())  # the console may wrap the line
    assert f"model.safetensors is not a safetensors file (a header length of {length} bytes)" in (
        error
    )
    assert not (tmp_path / "t2").exists()

    piped = _copy_of(model, tmp_path / "piped")
    os.mkfifo(piped / "stream")
    (tmp_path / "t3").mkdir()  # an empty folder given: it stays, empty
    ran = rsilab("task", "init", tmp_path / "t3", "--kind", "lm", "--model", piped)
    assert ran.exit_code == 2, explain(ran)
    assert "could not write the task" in ran.stderr and "stream" in ran.stderr
    assert list((tmp_path / "t3").iterdir()) == []
    (piped / "stream").unlink()
    again = rsilab("task", "init", tmp_path / "t3", "--kind", "lm", "--model", piped)
    assert again.exit_code == 0, explain(again)


def _sandbox_for(task_toml: Path) -> Sandbox:
    """bubblewrap with the task's runtime where both are there; else a plain process in the
    task's runtime or, without one, this venv (which holds the same libraries)."""
    runtime = load_task(str(task_toml)).runtime()
    if bwrap_problem() is None and runtime.is_installed():
        return BwrapSandbox(runtime=runtime)
    return ProcessSandbox(runtime=runtime)


def test_the_task_trains_and_predicts_with_the_users_model(tmp_path: Path, model: Path) -> None:
    # What `rsilab task check --run` does, with the task's runtime (the command itself runs
    # a task.toml's jobs in the base runtime until the runtime wiring reaches task.toml tasks).
    task_dir = _init(tmp_path, model)
    config_path = task_dir / "harness/config.json"
    config = json.loads(config_path.read_text())
    config.update(epochs=1, lr=0.01, few_shot=1, max_new_tokens=4)
    config_path.write_text(json.dumps(config))
    task = load_task(str(task_dir / "task.toml"))
    sandbox = _sandbox_for(task_dir / "task.toml")
    with sandbox:
        problems, outcome = check_run(task, sandbox, bytes(32))
    assert problems == [], [str(p) for p in problems]
    assert outcome is not None and set(outcome.scores) == {"arith", "reverse", "choice"}
    assert all(len(outcome.samples[name]) > 0 for name in outcome.scores)


def test_the_generated_contract_test_passes(tmp_path: Path, model: Path) -> None:
    _init(tmp_path, model)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "mylm/tests"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


@pytest.fixture
def model_in_place(model: Path) -> Iterator[Path]:
    """A copy of the user's model in a folder every user can pass through (a sandbox's jobs
    run as a user of their own; pytest's temporary folders are private to root)."""
    with passable_folder("rsilab-users-model-") as top:
        folder = top / "my-model"
        shutil.copytree(model, folder)
        for path in [folder, *folder.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        yield folder


def _init_in_place(tmp_path: Path, model: Path) -> Path:
    """``task init big --kind lm --model MODEL --model-in-place``; the task folder."""
    made = rsilab(
        "task", "init", tmp_path / "big", "--kind", "lm", "--model", model, "--model-in-place"
    )  # fmt: skip
    assert made.exit_code == 0, explain(made)
    return tmp_path / "big"


def test_a_model_used_in_place_is_named_not_copied_and_jobs_read_it_there(
    tmp_path: Path, model_in_place: Path
) -> None:
    task_dir = _init_in_place(tmp_path, model_in_place)
    assert not (task_dir / "harness/base_model").exists(), "nothing copied"
    config_path = task_dir / "harness/config.json"
    config = json.loads(config_path.read_text())
    assert config["base_model"] == str(model_in_place)
    task = load_task(str(task_dir / "task.toml"))
    assert task.model == model_in_place
    assert task.shown() == (model_in_place,)
    config.update(epochs=1, lr=0.01, few_shot=1, max_new_tokens=4)
    config_path.write_text(json.dumps(config))
    runtime = task.runtime()
    if bwrap_problem() is None and runtime.is_installed():
        sandbox: Sandbox = BwrapSandbox(runtime=runtime, shown=task.shown())
    else:
        sandbox = ProcessSandbox(runtime=runtime)
    with sandbox:
        problems, outcome = check_run(task, sandbox, bytes(32))
    assert problems == [], [str(p) for p in problems]
    assert outcome is not None and set(outcome.scores) == {"arith", "reverse", "choice"}
    if runtime.is_installed():  # the command runs the task's jobs in its runtime, model shown
        checked = rsilab("task", "check", "--no-probe", "--run", task_dir, "--lab", tmp_path / "n")
        assert checked.exit_code == 0, explain(checked)
        assert "run: dev scores" in checked.stderr


def test_check_run_refuses_a_model_in_place_its_jobs_cannot_use_as_a_campaign_would(
    tmp_path: Path, model_in_place: Path
) -> None:
    """Before, `task check --run` went on to a job that failed with a transformers traceback;
    `rsilab run` refused in one line. Now both say the same."""
    task_dir = _init_in_place(tmp_path, model_in_place)
    outside = tmp_path / "outside.txt"
    outside.write_text("not the model's")
    (model_in_place / "extra.txt").symlink_to(outside)
    task = load_task(str(task_dir / "task.toml"))
    with ProcessSandbox(runtime=task.runtime()) as sandbox:
        problems, outcome = check_run(task, sandbox, bytes(32))
    assert outcome is None and len(problems) == 1
    assert problems[0].message.startswith(f"its jobs cannot use the model at {model_in_place}: ")
    assert "extra.txt" in problems[0].message and "cp -rL" in problems[0].message


def test_model_in_place_goes_with_a_model(tmp_path: Path) -> None:
    refused = rsilab("task", "init", tmp_path / "x", "--kind", "lm", "--model-in-place")
    assert refused.exit_code != 0
    assert not (tmp_path / "x").exists()
