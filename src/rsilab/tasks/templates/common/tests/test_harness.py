"""The harness contract, on this task's own data: run with ``python -m pytest tests``.

Copies the harness to a scratch workspace as rsilab does, runs train (when harness.toml names
one) on some samples, then predict on others, and checks what rsilab checks: one
``{"id", "output"}`` line per input, in input order. Edit the harness; keep this passing.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

TASK = Path(__file__).resolve().parent.parent


def _command(line: str) -> list[str]:
    argv = shlex.split(line)
    return [sys.executable, *argv[1:]] if argv[0] in ("python", "python3") else argv


def _samples() -> list[dict[str, Any]]:
    spec = tomllib.loads((TASK / "task.toml").read_text("utf-8"))
    pool = TASK / spec["benchmarks"][0]["pool"]
    return [json.loads(line) for line in pool.read_text("utf-8").splitlines() if line.strip()]


def test_train_then_predict_keeps_the_contract(tmp_path: Path) -> None:
    spec = tomllib.loads((TASK / "task.toml").read_text("utf-8"))
    workspace = tmp_path / "workspace"
    shutil.copytree(TASK / spec["harness"], workspace)
    manifest = tomllib.loads((workspace / "harness.toml").read_text("utf-8"))["harness"]
    samples = _samples()
    train, held_out = samples[:100], samples[100:140]
    predict = _command(manifest["predict"])
    if "train" in manifest:
        (workspace / "data-in").mkdir()
        lines = "".join(json.dumps(s) + "\n" for s in train)
        (workspace / "data-in" / "train.jsonl").write_text(lines)
        argv = [*_command(manifest["train"]), "--data", "data-in"]
        argv += ["--model-out", "model/model.json", "--seed", "0"]
        argv += ["--config", manifest["config"]] if "config" in manifest else []
        subprocess.run(argv, cwd=workspace, check=True, timeout=60)
        predict += ["--model", "model/model.json"]
    stdin = "".join(json.dumps({"id": s["id"], "input": s["input"]}) + "\n" for s in held_out)
    done = subprocess.run(
        [*predict, "--seed", "0"],
        cwd=workspace,
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    outputs = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert [o["id"] for o in outputs] == [s["id"] for s in held_out]
    assert all("output" in o for o in outputs)
