"""run_experiment (what `rsilab task check --run` runs) gives train what a campaign gives it."""

from __future__ import annotations

from pathlib import Path

from rsilab.sandbox.base import Sandbox
from rsilab.tasks import load_task, run_experiment
from tests.tasks.task_files import write_toml_task

# A train that writes its model where --model-out says, without making the folder first:
# the controller's and a worker's train jobs find that folder made, so this one must too.
_TRAIN_NO_MKDIR = """\
import argparse, json
parser = argparse.ArgumentParser()
parser.add_argument("--data", required=True)
parser.add_argument("--model-in")
parser.add_argument("--model-out", required=True)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--config", default="config.json")
args = parser.parse_args()
config = json.load(open(args.config))
json.dump({"bias": config["bias"]}, open(args.model_out, "w"))
"""


def test_train_finds_the_folder_of_its_model_made(
    tmp_path: Path, sandbox: Sandbox, secret: bytes
) -> None:
    path = write_toml_task(tmp_path / "t", "nomkdir")
    (tmp_path / "t" / "harness" / "train.py").write_text(_TRAIN_NO_MKDIR)
    outcome = run_experiment(load_task(path), sandbox, secret)
    assert outcome.samples["agree"] and all(s.valid for s in outcome.samples["agree"])
