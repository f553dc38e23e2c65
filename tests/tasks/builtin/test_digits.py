"""digits end to end: train writes safetensors, predict beats chance, the data stays hidden."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

from rsilab.sandbox.base import Sandbox
from rsilab.tasks import get_task, load_manifest, run_experiment


def test_train_and_predict_through_the_contract(
    tmp_path: Path, sandbox: Sandbox, secret: bytes
) -> None:
    task = get_task("digits")
    workspace = tmp_path / "ws"
    shutil.copytree(task.harness, workspace)
    outcome = run_experiment(task, sandbox, secret, seed=1, workspace=workspace)
    assert outcome.model == workspace / "model/model.safetensors"
    raw = outcome.model.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + length])
    assert {"0.weight", "2.weight"} <= set(header)
    assert json.loads(header["__metadata__"]["config"])["hidden"] == 8
    assert not raw.startswith(b"\x80")  # a pickle would start with the PROTO opcode
    accuracy = outcome.scores["accuracy"]
    assert 0.15 < accuracy < 0.9, "the weak start must beat chance (0.1) and leave room"
    assert all(s.valid for s in outcome.samples["accuracy"])


def test_the_spec_declares_source_and_config() -> None:
    task = get_task("digits")
    assert [p.name for p in task.data_sources] == ["digits.csv.gz"]
    config = json.loads((task.harness / "config.json").read_text())
    assert config == task.default_config()
    assert load_manifest(task.harness).model == "safetensors"
    assert (task.harness / "eval.py").is_file()
