"""rsilab benchmarks: run with `make bench`; results go to BENCHMARKS.md."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

OUTPUTS = ("BENCHMARKS.md", "benchmarks/figures", "benchmarks/results")
"""What the benchmarks write: a change there does not make the measured code dirty."""


def current_commit() -> str:
    """The short commit of the checkout the benchmarks run from, ``-dirty`` appended when
    tracked files other than the benchmarks' own :data:`OUTPUTS` differ from it (so a number
    is never credited to a commit it did not come from); ``unknown`` outside a git
    checkout."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD")
    if not commit:
        return "unknown"
    outputs = [f":(exclude){path}" for path in OUTPUTS]
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", *outputs)
    return commit + ("-dirty" if changed else "")


@contextmanager
def env_at(name: str, value: str) -> Iterator[None]:
    """Set the environment variable ``name`` to ``value`` for the block, then put back what
    was there (or nothing)."""
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


def key_dir_at(folder: Path) -> AbstractContextManager[None]:
    """Point RSILAB_KEY_DIR at ``folder`` for the block, so no key lands in the user's folder."""
    return env_at("RSILAB_KEY_DIR", str(folder))
