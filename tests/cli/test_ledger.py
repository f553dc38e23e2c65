"""``rsilab log``, ``show`` and ``verify``."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.helpers import explain, rsilab
from tests.sandbox.unprivileged import run_as_test_user


def _create_direction(lab: Path, campaign_id: str) -> str:
    args = json.dumps({"title": "t", "hypothesis": "h"})
    result = rsilab(
        "call", "create_direction", "--role", "main", "--campaign", campaign_id,
        "--args", args, "--lab", lab,
    )  # fmt: skip
    assert result.exit_code == 0, explain(result)
    return str(json.loads(result.stdout)["id"])


def _seqs(stdout: str) -> list[int]:
    """The sequence numbers of the event rows in a printed table."""
    firsts = [line.split()[0] for line in stdout.splitlines() if line.strip()]
    return [int(word) for word in firsts if word.isdigit()]


def test_log_shows_events(lab: Path, campaign_id: str) -> None:
    direction_id = _create_direction(lab, campaign_id)
    result = rsilab("log", "--lab", lab)
    assert result.exit_code == 0, explain(result)
    assert _seqs(result.stdout) == [1, 2, 3]
    for text in ("lab_created", "campaign_created", "create_direction", direction_id, "main"):
        assert text in result.stdout


def test_log_limit_shows_the_last_events(lab: Path, campaign_id: str) -> None:
    _create_direction(lab, campaign_id)
    result = rsilab("log", "--limit", "2", "--lab", lab)
    assert _seqs(result.stdout) == [2, 3]


def test_log_campaign_filters(lab: Path, campaign_id: str) -> None:
    _create_direction(lab, campaign_id)
    other = rsilab("campaign", "new", "synthetic", "--lab", lab).stdout.strip()
    result = rsilab("log", "--campaign", other, "--lab", lab)
    assert result.exit_code == 0, explain(result)
    assert _seqs(result.stdout) == [4]
    assert "create_direction" not in result.stdout
    result = rsilab("log", "--campaign", campaign_id, "--lab", lab)
    assert _seqs(result.stdout) == [2, 3]


def test_show_record_with_history(lab: Path, campaign_id: str) -> None:
    direction_id = _create_direction(lab, campaign_id)
    result = rsilab("show", direction_id, "--lab", lab)
    assert result.exit_code == 0, explain(result)
    assert f"direction: {direction_id}" in result.stdout
    assert '"hypothesis": "h"' in result.stdout
    assert "history (1 event)" in result.stdout
    assert _seqs(result.stdout) == [3]


def test_show_event_by_number(lab: Path, campaign_id: str) -> None:
    for ref in ("2", "event:2"):
        result = rsilab("show", ref, "--lab", lab)
        assert result.exit_code == 0, explain(result)
        assert "event 2" in result.stdout
        assert '"action": "campaign_created"' in result.stdout
        assert campaign_id in result.stdout


def test_show_unknown_is_a_user_error(lab: Path) -> None:
    for ref in ("exp-000000000000", "nonsense", "99"):
        result = rsilab("show", ref, "--lab", lab)
        assert result.exit_code == 2, explain(result)
        assert result.stderr.startswith("error: ")
        assert "hint:" in result.stderr


def test_verify_ok(lab: Path, campaign_id: str) -> None:
    _create_direction(lab, campaign_id)
    result = rsilab("verify", "--lab", lab)
    assert result.exit_code == 0, explain(result)
    assert "ledger ok: 3 events" in result.stdout
    assert "head hash: " in result.stdout
    report = json.loads(rsilab("verify", "--json", "--lab", lab).stdout)
    assert report["ok"] is True
    assert report["events"] == 3


def test_verify_names_the_tampered_event(lab: Path, campaign_id: str) -> None:
    _create_direction(lab, campaign_id)
    conn = sqlite3.connect(lab / "lab.db")
    with conn:
        (body,) = conn.execute("SELECT body FROM events WHERE seq = 2").fetchone()
        forged = body.replace('"actor":"cli"', '"actor":"eve"')
        assert forged != body
        conn.execute("UPDATE events SET body = ? WHERE seq = 2", (forged,))
    conn.close()
    result = rsilab("verify", "--lab", lab)
    assert result.exit_code == 3, explain(result)
    assert "first bad event: 2" in result.stdout
    assert "event 2" in result.stdout
    report = json.loads(rsilab("verify", "--json", "--lab", lab).stdout)
    assert report["ok"] is False
    assert report["first_bad_seq"] == 2


def test_log_of_an_unparseable_event_points_to_verify(lab: Path, campaign_id: str) -> None:
    conn = sqlite3.connect(lab / "lab.db")
    with conn:
        conn.execute("UPDATE events SET body = '{not json' WHERE seq = 2")
    conn.close()
    result = rsilab("log", "--lab", lab)
    assert result.exit_code == 2, explain(result)
    assert "does not parse" in result.stderr
    assert "rsilab verify" in result.stderr
    assert rsilab("verify", "--lab", lab).exit_code == 3


def test_verify_without_the_key_says_it_is_incomplete_and_exits_1(
    lab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key moved away is a check skipped, not a pass: not "ledger ok", and exit 1."""
    monkeypatch.setenv("RSILAB_KEY_DIR", str(tmp_path / "elsewhere"))
    result = rsilab("verify", "--lab", lab)
    assert result.exit_code == 1, explain(result)
    assert "ledger ok" not in result.stdout
    assert "NOT fully verified" in result.stdout
    assert "ledger key was not found" in result.stdout
    as_json = json.loads(rsilab("verify", "--json", "--lab", lab).stdout)
    assert (as_json["ok"], as_json["complete"], as_json["key_missing"]) == (True, False, True)
    assert as_json["checkpoints_checked"] == 0
    assert as_json["checkpoints_unchecked"] >= 1


# -- a read-only lab ---------------------------------------------------------------------------

SRC = Path(__file__).resolve().parents[2] / "src"

READERS = """
import subprocess, sys
lab = sys.argv[1]
for args in (["verify"], ["log"], ["show", "1"], ["report", "latest"]):
    done = subprocess.run([sys.executable, "-m", "rsilab", *args, "--lab", lab],
                          capture_output=True, text=True)
    print(f"== {args[0]} exit {done.returncode}")
    print(done.stdout[:1500], done.stderr[-800:])
"""


@pytest.fixture
def ran_lab_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """A copy of a lab after a real small run, and of its key folder, in a folder another
    local user can enter; every file made read-only (restored afterwards for cleanup)."""
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    ran = rsilab("run", "synthetic", "--budget", "experiments=1", "--lab", lab)
    assert ran.exit_code == 0, explain(ran)
    shared = Path(tempfile.mkdtemp(prefix="rsilab-test-"))
    shared.chmod(0o755)
    copy, keys = shared / "lab", shared / "keys"
    shutil.copytree(lab, copy, ignore=shutil.ignore_patterns("workspaces"))
    shutil.copytree(os.environ["RSILAB_KEY_DIR"], keys)
    for folder in (copy, keys):
        for item in [*folder.rglob("*"), folder]:
            item.chmod(0o555 if item.is_dir() else 0o444)
    try:
        yield copy, keys
    finally:
        for folder in (copy, keys):
            for item in [folder, *folder.rglob("*")]:
                item.chmod(0o755 if item.is_dir() else 0o644)
        shutil.rmtree(shared, ignore_errors=True)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _assert_readers_worked(output: str) -> None:
    for command in ("verify", "log", "show", "report"):
        assert f"== {command} exit 0" in output, output
    assert "ledger ok:" in output, output
    assert "lab_created" in output and "# Campaign report: cmp-" in output, output


def test_a_read_only_copy_of_a_lab_after_a_run_verifies_as_another_user(
    ran_lab_copy: tuple[Path, Path],
) -> None:
    copy, keys = ran_lab_copy
    before = _files(copy)
    env = {"PYTHONPATH": str(SRC), "RSILAB_KEY_DIR": str(keys)}
    if os.geteuid() == 0:  # root ignores file modes: a user they bind runs the commands
        home = Path(tempfile.mkdtemp(prefix="rsilab-test-user-home-"))
        try:
            proc = run_as_test_user(
                ["-c", READERS, str(copy)], home, env=env, timeout=300, reachable=[copy, keys]
            )
        finally:
            shutil.rmtree(home, ignore_errors=True)
    else:
        proc = subprocess.run(
            [sys.executable, "-c", READERS, str(copy)],
            env={**os.environ, **env}, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    _assert_readers_worked(proc.stdout + proc.stderr)
    assert _files(copy) == before


def test_a_lab_on_a_read_only_mount_verifies(ran_lab_copy: tuple[Path, Path]) -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("mounting needs root and unshare")
    copy, keys = ran_lab_copy
    for item in [copy, *copy.rglob("*")]:  # writable by its mode: only the mount forbids it
        item.chmod(0o755 if item.is_dir() else 0o644)
    before = _files(copy)
    script = (
        f'mount --bind "{copy}" "{copy}" && mount -o remount,bind,ro "{copy}" && '
        f'"{sys.executable}" -c "$READERS" "{copy}"'
    )
    proc = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "bash", "-c", script],
        env={**os.environ, "READERS": READERS, "PYTHONPATH": str(SRC),
             "RSILAB_KEY_DIR": str(keys)},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    _assert_readers_worked(proc.stdout + proc.stderr)
    assert "Read-only file system" not in proc.stdout + proc.stderr
    assert _files(copy) == before
