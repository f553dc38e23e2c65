"""Several writer processes on one lab, on every SQL backend: the ledger stays gap-free and
unforked (SQLite takes its write lock with BEGIN IMMEDIATE; PostgreSQL a per-lab advisory lock).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rsilab.store import Lab, verify_store


@pytest.fixture(params=["sqlite", "postgres"])
def lab_where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new lab's ``--lab`` value: a folder, or a PostgreSQL URL."""
    where = str(tmp_path / "lab")
    if request.param == "postgres":
        where = request.getfixturevalue("pg_lab_url")
    Lab.init(where).close()
    return where


WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from rsilab.records import EventDraft, Finding, FindingStatus
    from rsilab.store import Lab

    where, name, count, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    with Lab.open(where) as lab:
        store = lab.store
        (go.parent / f"ready-{name}").touch()
        deadline = time.monotonic() + 60
        while not go.exists():
            if time.monotonic() > deadline:
                sys.exit("never told to start")
            time.sleep(0.002)
        for i in range(count):
            store.commit(
                EventDraft(actor=name, role="worker", action="test", detail=str(i)),
                [Finding(claim=f"{name} {i}", status=FindingStatus.UNRESOLVED)],
            )
    print("done", name)
    """
)


def wait_for(paths: list[Path], procs: list[subprocess.Popen[str]], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not all(p.exists() for p in paths):
        for proc in procs:
            if proc.poll() is not None:
                out, err = proc.communicate()
                pytest.fail(f"writer exited early ({proc.returncode}): {out}{err}")
        if time.monotonic() > deadline:
            pytest.fail("writers did not get ready in time")
        time.sleep(0.005)


def test_two_processes_commit_into_one_lab(lab_where: str, tmp_path: Path) -> None:
    go, per_process = tmp_path / "go", 300
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, lab_where, name, str(per_process), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for name in ("alpha", "beta")
    ]
    try:
        wait_for([tmp_path / "ready-alpha", tmp_path / "ready-beta"], procs, 60)
        go.touch()
        results = [proc.communicate(timeout=120) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()

    assert [p.returncode for p in procs] == [0, 0], results
    total = 1 + 2 * per_process  # Lab.init wrote event 1
    with Lab.open(lab_where) as lab:
        store = lab.store
        events = store.events()
        assert [e.seq for e in events] == list(range(1, total + 1))
        for name in ("alpha", "beta"):
            mine = [int(e.detail) for e in events if e.actor == name]
            assert mine == list(range(per_process))  # each process's commits in its own order
        assert len(store.query(kind="finding")) == 2 * per_process
        report = verify_store(store)
    assert report.ok, report.problems
    assert report.checkpoints_checked >= total // 64
