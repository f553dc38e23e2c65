"""``rsilab init``, ``schema``, lab resolution and what a broken lab looks like to a person."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.helpers import explain, rsilab


def test_init_creates_lab_and_names_key(tmp_path: Path, isolated_environment: Path) -> None:
    result = rsilab("init", "--lab", tmp_path / "lab")
    assert result.exit_code == 0, explain(result)
    assert (tmp_path / "lab" / "lab.db").exists()
    assert "created lab lab-" in result.stdout
    assert str(isolated_environment) in result.stdout  # where the key was written
    assert list(isolated_environment.glob("lab-*.key"))


def test_second_init_fails_with_hint(lab: Path) -> None:
    result = rsilab("init", "--lab", lab)
    assert result.exit_code == 2, explain(result)
    assert "error: a lab already exists" in result.stderr
    assert "hint:" in result.stderr
    assert "Traceback" not in result.output


def test_rsilab_lab_environment_is_honoured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RSILAB_LAB", str(tmp_path / "envlab"))
    assert rsilab("init").exit_code == 0
    assert (tmp_path / "envlab" / "lab.db").exists()
    result = rsilab("log")
    assert result.exit_code == 0, explain(result)
    assert "lab_created" in result.stdout


def test_missing_lab_hints_at_init(tmp_path: Path) -> None:
    result = rsilab("campaign", "list", "--lab", tmp_path / "nowhere")
    assert result.exit_code == 2, explain(result)
    assert "error: no rsilab lab" in result.stderr
    hint = next(line for line in result.stderr.splitlines() if line.startswith("hint:"))
    assert "rsilab init" in hint


def test_corrupt_database_is_a_clear_user_error(lab: Path) -> None:
    for leftover in lab.glob("lab.db-*"):
        leftover.unlink()
    (lab / "lab.db").write_bytes(os.urandom(8192))
    result = rsilab("log", "--lab", lab)
    assert result.exit_code == 2, explain(result)
    assert "not a readable rsilab lab database" in result.stderr
    assert "hint:" in result.stderr
    assert "Traceback" not in result.output


def test_schema_to_file_and_stdout(tmp_path: Path) -> None:
    out = tmp_path / "schema.json"
    assert rsilab("schema", "--out", out).exit_code == 0
    written = json.loads(out.read_text())
    assert written["schema_version"] >= 1
    assert "experiment" in written["records"]
    printed = rsilab("schema")
    assert json.loads(printed.stdout) == written


def test_main_prints_user_errors_without_traceback(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "rsilab", "log", "--lab", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: no rsilab lab")
    assert "rsilab init" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_bad_command_line_exits_2() -> None:
    result = rsilab("call", "show_datapool", "--role", "janitor")
    assert result.exit_code == 2, explain(result)


def _init_with_key_folder_under_a_file(
    tmp_path: Path, lab: Path
) -> subprocess.CompletedProcess[str]:
    """``rsilab init`` where the key folder cannot be made: the user's config folder is a
    regular file (as a read-only or broken HOME leaves it), and no RSILAB_KEY_DIR is set."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    env = {k: v for k, v in os.environ.items() if k != "RSILAB_KEY_DIR"}
    env |= {"XDG_CONFIG_HOME": str(blocker), "HOME": str(blocker)}
    return subprocess.run(
        [sys.executable, "-m", "rsilab", "init", "--lab", str(lab)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_init_whose_key_cannot_be_written_makes_no_lab(tmp_path: Path) -> None:
    lab = tmp_path / "new lab"
    ran = _init_with_key_folder_under_a_file(tmp_path, lab)
    assert ran.returncode == 2, ran.stderr
    errors = [line for line in ran.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "ledger key" in errors[0] and "not-a-folder" in errors[0]
    assert "RSILAB_KEY_DIR" in ran.stderr
    assert not lab.exists()
    # nothing half-made is in the way once the key folder is fixed
    again = rsilab("init", "--lab", lab)
    assert again.exit_code == 0, explain(again)
