"""A disk that refuses writes (full, read-only) under the lab or the temporary folder: every
command ends with one ``error:`` line naming what could not be written and where, a hint
saying what to do, exit code 74, and nothing recorded before is lost."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.helpers import explain, rsilab
from tests.disks import AS_ROOT, fill, small_tmpfs

pytestmark = AS_ROOT


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(("error:", "hint:"))]


def _cli(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``rsilab ARGS`` as its own process, as a person runs it."""
    argv = [sys.executable, "-m", "rsilab", *map(str, args)]
    return subprocess.run(argv, capture_output=True, text=True, env=env, check=False)


@pytest.mark.parametrize(
    "leave_kib",
    # none left: SQLite says SQLITE_FULL; a few KiB: its WAL index fails as "disk I/O error"
    [0, 16],
)
def test_init_on_a_full_disk_exits_74_naming_the_database_and_works_once_freed(
    tmp_path: Path, leave_kib: int
) -> None:
    with small_tmpfs(tmp_path / "disk") as disk:
        filler = fill(disk, leave_kib=leave_kib)
        refused = rsilab("init", "--lab", disk / "lab")
        assert refused.exit_code == 74, explain(refused)
        error, hint = _errors(refused.stderr)
        assert error.startswith(f"error: cannot write {disk}/lab/lab.db: no space left"), error
        assert f"free space on {disk}, then run the command again" in hint
        filler.unlink()
        assert rsilab("init", "--lab", disk / "lab").exit_code == 0
        verified = rsilab("verify", "--lab", disk / "lab")
        assert verified.exit_code == 0, explain(verified)


def test_a_read_only_lab_folder_exits_74_saying_so(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "ro", read_only=True) as disk:
        refused = rsilab("init", "--lab", disk / "lab")
    assert refused.exit_code == 74, explain(refused)
    error, hint = _errors(refused.stderr)
    assert "the filesystem is read-only" in error and str(disk) in error
    assert hint.startswith(f"hint: make the filesystem on {disk} writable again")


def test_a_campaign_cut_off_by_a_full_disk_exits_74_keeps_its_records_and_resumes(
    tmp_path: Path,
) -> None:
    with small_tmpfs(tmp_path / "disk") as disk:
        lab = disk / "lab"
        assert rsilab("init", "--lab", lab).exit_code == 0
        filler = fill(disk, leave_kib=1000)  # room for the campaign to start, not to end
        ran = _cli("run", "synthetic", "--budget", "experiments=6", "--seed", "3", "--lab", lab)
        assert ran.returncode == 74, ran.stderr
        assert "Traceback" not in ran.stderr
        error, hint = _errors(ran.stderr)
        assert re.match(rf"error: cannot write {lab}/\S+: no space left on the device", error)
        found = re.fullmatch(
            rf"hint: free space on {disk}, then `rsilab resume (cmp-\w+)` continues the campaign",
            hint,
        )
        assert found, hint
        filler.unlink()
        assert _cli("verify", "--lab", lab).returncode == 0
        resumed = _cli("resume", found[1], "--lab", lab)
        assert resumed.returncode == 0, resumed.stderr
        assert f"campaign {found[1]} [finished]: 6 experiments" in resumed.stdout
        verified = _cli("verify", "--lab", lab)
        assert verified.returncode == 0, verified.stdout + verified.stderr


def test_task_check_run_with_a_full_temporary_folder_exits_74_not_as_a_task_problem(
    tmp_path: Path,
) -> None:
    with small_tmpfs(tmp_path / "disk") as disk:
        (disk / "tmp").mkdir()
        fill(disk, leave_kib=100)
        env = {**os.environ, "TMPDIR": str(disk / "tmp")}
        checked = _cli("task", "check", "--run", "synthetic", "--probe-seconds", "1", env=env)
    assert checked.returncode == 74, checked.stdout + checked.stderr
    error, hint = _errors(checked.stderr)
    assert error.startswith(f"error: cannot write {disk}/tmp/"), error
    assert "no space left on the device" in error
    assert hint.startswith(f"hint: free space on {disk}")
    assert "could not start" not in checked.stdout + checked.stderr
