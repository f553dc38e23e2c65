"""run_experiment (what `rsilab task check --run` runs) gives train what a campaign gives it."""

from __future__ import annotations

from pathlib import Path

from rsilab.sandbox.base import Sandbox
from rsilab.tasks import load_task, run_experiment
from tests.tasks.task_files import _TRAIN, write_toml_task

MKDIR = "Path(args.model_out).parent.mkdir(parents=True, exist_ok=True)\n"
# A train that writes its model where --model-out says, without making the folder first:
# the controller's and a worker's train jobs find that folder made, so this one must too.
_TRAIN_NO_MKDIR = _TRAIN.replace(MKDIR, "")


def test_train_finds_the_folder_of_its_model_made(
    tmp_path: Path, sandbox: Sandbox, secret: bytes
) -> None:
    assert MKDIR in _TRAIN  # the shared train makes the folder; this one must not
    path = write_toml_task(tmp_path / "t", "nomkdir")
    (tmp_path / "t" / "harness" / "train.py").write_text(_TRAIN_NO_MKDIR)
    outcome = run_experiment(load_task(path), sandbox, secret)
    assert outcome.samples["agree"] and all(s.valid for s in outcome.samples["agree"])
