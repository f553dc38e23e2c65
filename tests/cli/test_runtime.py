"""`rsilab runtime show --task T`: where a task's runtime is, and what its build step made."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from rsilab.tasks import get_task
from tests.cli.helpers import explain, rsilab
from tests.sandbox.fake_runtime import fake_task_runtime

LINES = ["transformers==5.24.0", "tokenizers==0.23.3", "peft==0.21.2"]


def test_show_names_the_task_runtime_and_its_base_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RSILAB_RUNTIME", str(tmp_path / "rt"))
    build_id = str(get_task("posttrain").build_id())
    runtime = fake_task_runtime(LINES, b"weights", build_id)
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
    assert shown["build_id"] == shown["built_by"] == build_id


def test_show_says_a_runtime_of_an_older_build_is_not_installed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RSILAB_RUNTIME", str(tmp_path / "rt"))
    fake_task_runtime(LINES, b"weights", "corpus 0123456789ab, build 0123456789ab")
    result = rsilab("runtime", "show", "--task", "posttrain")
    assert result.exit_code == 0, explain(result)
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("installed:")]
    assert "no (its base was built by 'corpus 0123456789ab" in line
    assert line.endswith("run `rsilab runtime install --task posttrain`)")


def test_show_says_how_to_install_a_missing_task_runtime(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RSILAB_RUNTIME", str(tmp_path / "rt"))
    result = rsilab("runtime", "show", "--task", "posttrain")
    assert result.exit_code == 0, explain(result)
    assert "installed: no (run `rsilab runtime install --task posttrain`)" in result.stdout
