"""``rsilab doctor`` and ``rsilab runtime show``: what a person sees about isolation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.helpers import explain, rsilab
from tests.sandbox.helpers import bwrap_problem


def test_doctor_names_the_sandbox_and_each_property() -> None:
    result = rsilab("doctor")
    assert result.exit_code == 0, explain(result)
    for word in ("sandbox:", "filesystem", "network", "user", "limits", "cgroups", "runtime:"):
        assert word in result.stdout
    assert "meaning:" in result.stdout


def test_doctor_json_for_the_process_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    result = rsilab("doctor", "--json")
    assert result.exit_code == 0, explain(result)
    report = json.loads(result.stdout)
    assert report["sandbox"] == "process" and report["security_boundary"] is False
    answers = {p["property"]: p["answer"] for p in report["properties"]}
    assert answers["filesystem"] == answers["network"] == answers["user"] == "no"
    assert "trust" in report["meaning"]


@pytest.mark.skipif(bwrap_problem() is not None, reason="bubblewrap is unusable here")
def test_doctor_json_for_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RSILAB_SANDBOX", raising=False)
    report = json.loads(rsilab("doctor", "--json").stdout)
    assert report["sandbox"] == "bwrap" and report["security_boundary"] is True
    assert {p["answer"] for p in report["properties"]} <= {"yes", "partly"}


def test_doctor_reports_an_unusable_choice_and_exits_zero(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "bwrap")
    monkeypatch.setenv("RSILAB_RUNTIME", str(tmp_path / "missing"))
    result = rsilab("doctor")
    assert result.exit_code == 0, explain(result)
    assert "sandbox: none" in result.stdout and "not installed" in result.stdout


def test_runtime_show_json(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RSILAB_RUNTIME", str(tmp_path / "rt"))
    result = rsilab("runtime", "show", "--json")
    assert result.exit_code == 0, explain(result)
    shown = json.loads(result.stdout)
    assert shown["path"] == str(tmp_path / "rt") and shown["installed"] is False
    assert shown["requirements"][0] == "torch==2.13.0"


@pytest.mark.skipif(bwrap_problem() is not None, reason="needs a working bubblewrap")
@pytest.mark.parametrize(
    ("flag", "value", "named"),
    [("n", 256, "hard open-files limit"), ("f", 1000, "hard file-size limit")],
)
def test_a_shell_whose_hard_limit_is_below_a_jobs_is_named(
    flag: str, value: int, named: str
) -> None:
    """Started from a shell whose hard open-files (or file-size) limit is below a job's: the
    job's rlimit cannot be set, and the hint names that limit and the `ulimit` flag that
    raises it (not user namespaces)."""
    lowered = f"ulimit -S{flag} {value} && ulimit -H{flag} {value}"
    script = f"{lowered} && exec {sys.executable} -m rsilab doctor"
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=False)
    said = " ".join((done.stdout + done.stderr).split())
    assert "sandbox: none" in said and "No job can run" in said, said
    assert named in said and f"ulimit -H{flag}" in said, said
