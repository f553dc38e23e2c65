"""Starting ``rsilab`` removes the temporary folders killed rsilab processes left, only theirs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_rsilab_removes_a_dead_processs_folders_when_it_starts(tmp_path: Path) -> None:
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")[:8]
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead = tmp_path / f"rsilab-controller-{gone.pid}@{boot}-x1y2z3"
    (dead / "system").mkdir(parents=True)
    live = tmp_path / f"rsilab-sandbox-{os.getpid()}@{boot}-a1b2c3"
    live.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "rsilab", "--help"], env=env, capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert not dead.exists() and live.is_dir()
