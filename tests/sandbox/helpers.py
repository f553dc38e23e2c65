"""Shared by the sandbox and executor tests: building sandboxes, specs, and waiting."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rsilab.sandbox import BwrapSandbox, Limits, ProcessSandbox, RunSpec, Sandbox
from rsilab.sandbox.base import SandboxUnavailable

SANDBOX_KINDS = ["process", "bwrap", "bwrap-no-cgroups"]
"""Every sandbox the conformance suite runs against (the last: bwrap's fallback limits)."""

QUICK = Limits(cpu_s=30, wall_s=30, memory_mb=1024, processes=64, disk_mb=64, file_mb=32)
"""Limits generous enough for the tests' small scripts, small enough to fail fast."""


@functools.cache
def bwrap_problem() -> str | None:
    """Why BwrapSandbox cannot be used here, or None when it can (checked once)."""
    try:
        BwrapSandbox().prepare()
    except SandboxUnavailable as exc:
        return str(exc)
    return None


def make_sandbox(kind: str) -> Sandbox:
    """A prepared sandbox of ``kind``; skips the test when bwrap cannot be used here."""
    if kind == "process":
        return ProcessSandbox()
    problem = bwrap_problem()
    if problem is not None:
        pytest.skip(f"bubblewrap is unusable here ({problem}); test_canary.py fails the suite")
    sandbox = BwrapSandbox(use_cgroups=False if kind == "bwrap-no-cgroups" else None)
    sandbox.prepare()
    return sandbox


def py(workspace: Path, code: str, **kwargs: object) -> RunSpec:
    """A spec running ``python -c code`` in ``workspace``."""
    kwargs.setdefault("limits", QUICK)
    return RunSpec(argv=("python", "-c", code), workspace=workspace, **kwargs)  # type: ignore[arg-type]


def wait_until(condition: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """Poll ``condition`` until it holds or the deadline passes; returns its last value."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def processes_with(marker: str) -> list[int]:
    """Host pids whose command line contains ``marker`` (zombies have none)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@contextlib.contextmanager
def passable_folder(prefix: str) -> Iterator[Path]:
    """A fresh folder under /tmp that every user can pass through (mode 755), removed after,
    whatever its contents' modes: a sandbox's jobs run as a user of their own, and pytest's
    temporary folders lie under one private to root."""
    made = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    made.chmod(0o755)
    try:
        yield made
    finally:
        for path in made.rglob("*"):
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o755)
        shutil.rmtree(made)
