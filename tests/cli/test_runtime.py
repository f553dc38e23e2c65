"""`rsilab runtime show --task T`: where a task's runtime is, and what its build step made."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.cli.helpers import explain, rsilab
from tests.sandbox.fake_runtime import fake_task_runtime

LINES = ["transformers==5.24.0", "tokenizers==0.23.3", "peft==0.21.2"]


def test_show_names_the_task_runtime_and_its_base_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RSILAB_RUNTIME", str(tmp_path / "rt"))
    runtime = fake_task_runtime(LINES, b"weights")
    result = rsilab("runtime", "show", "--task", "posttrain", "--json")
    assert result.exit_code == 0, explain(result)
    shown = json.loads(result.stdout)
    assert shown["path"] == str(runtime.path) and shown["installed"] is True
    assert shown["requirements"][-3:] == LINES
    assert shown["built"] == {
        "base": {
            "path": str(runtime.path / "share" / "base.bin"),
            "sha256": hashlib.sha256(b"weights").hexdigest(),
        }
    }
    assert shown["adopted"] is None


def test_show_says_how_to_install_a_missing_task_runtime(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RSILAB_RUNTIME", str(tmp_path / "rt"))
    result = rsilab("runtime", "show", "--task", "posttrain")
    assert result.exit_code == 0, explain(result)
    assert "installed: no (run `rsilab runtime install --task posttrain`)" in result.stdout
