"""The escape suite: under BwrapSandbox every attack in benchmarks/escape_attacks.py must be
contained, and the host must be fine afterwards.

As root (as CI runs) every attack is contained. Run as an unprivileged user (as
tests/sandbox/test_unprivileged.py does from a root run, and as any non-root ``make test``
does), the few attacks whose defence needs root meet the literal outcomes of
:data:`UNPRIVILEGED`, each with its reason, and every other attack is contained as under root.
A machine where bubblewrap is unusable fails test_canary.py, not only skips this suite."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from benchmarks.escape_attacks import (
    ATTACKS,
    Attack,
    Target,
    confinement_for,
    run_attack,
    targets,
)

from rsilab.sandbox import BwrapSandbox
from rsilab.sandbox._cgroup import probe
from tests.sandbox.helpers import bwrap_problem

pytestmark = pytest.mark.skipif(
    bwrap_problem() is not None,
    reason=f"bubblewrap is unusable here ({bwrap_problem()}); test_canary.py fails the suite",
)
ROOT = os.geteuid() == 0


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    root = tmp_path_factory.mktemp("escape")
    with targets(root) as made:
        yield made


@pytest.fixture(scope="module")
def bwrap(target: Target) -> Iterator[BwrapSandbox]:
    """Bound to the targets' lab, as a lab's services bind theirs."""
    with BwrapSandbox(confinement=confinement_for(target)) as sandbox:
        assert isinstance(sandbox, BwrapSandbox)
        yield sandbox


def _leftovers() -> list[str]:
    """Job cgroups of this process still on the host, and processes still in one.

    (Other processes of the sandbox uid may belong to other rsilab processes on this host.)
    """
    mine = f"rsilab-job-{os.getpid()}-"
    found = [str(p) for parent in probe().parents.values() for p in parent.glob(mine + "*")]
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and mine in (entry / "cgroup").read_text():
                found.append(entry.name)
        except OSError:
            continue
    return found


def test_the_targets_are_real(target: Target) -> None:
    """The attacks aim at things that exist and that the host itself can read."""
    assert target.secret in target.private_split.read_text()
    assert target.lab_db.read_bytes().startswith(b"SQLite format 3")
    assert target.rsilab_source.is_file()
    assert target.digits.is_file()


OBSERVED = {
    "fallocate past the disk limit": "0 of 8 x 500 MiB allocated, then ENOSPC",
    "make a user namespace (unshare -Ur)": "OSError/ENOSYS, PermissionError/EPERM",
    "find host paths in /proc": "entries read, none naming a host path",
    "work in a folder that holds the lab": "refused: workspace ",
}
"""What issue 21's attacks must meet, literally (a part of the observed line): fallocate fails
at once in a 256 MiB workspace; unshare and clone with CLONE_NEWUSER get EPERM and clone3
ENOSYS; /proc names no host path; a folder holding the lab is refused before any job."""


UNPRIVILEGED = {
    "fallocate past the disk limit": "MiB allocated on the host",
    "find host paths in /proc": "host paths in /proc: the workspace root",
    "memory bomb": "not killed for memory (killed=None)",
    "signal a host process": "succeeded: init",
}
"""What a non-root run sees where the defence needs root (a part of the observed line).

- fallocate: without root a workspace cannot be its own filesystem, so the disk limit is polled,
  not kernel-enforced; preflight refuses that mode unless the user passes ``--unbounded-disk``.
- /proc: without an image mount the workspace is a bind mount, and mountinfo names its folder
  (the path, not the data: the lab, key folder and task sources are still not mounted).
- memory bomb: without cgroups memory is bounded per process by RLIMIT_DATA, so the bomb ends
  with MemoryError at the limit instead of being killed for memory.
- signal: ``kill(1)`` reaches the job's own pid-namespace init (bubblewrap's, of the same uid),
  which the kernel does not let the job kill; the host's process (``kill``) stays unreachable.
"""


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name.replace(" ", "-") for a in ATTACKS])
def test_attack_is_contained(bwrap: BwrapSandbox, target: Target, attack: Attack) -> None:
    outcome = run_attack(bwrap, attack, target)
    if not ROOT and attack.name in UNPRIVILEGED:
        assert UNPRIVILEGED[attack.name] in outcome.observed, outcome.observed
        assert "succeeded: kill" not in outcome.observed
    else:
        assert outcome.contained, f"{attack.name}: {outcome.observed}"
        assert OBSERVED.get(attack.name, "") in outcome.observed
    assert not target.outside.exists()
    assert _leftovers() == [], "the job left processes or cgroups behind"


def test_the_unprivileged_exceptions_name_real_attacks() -> None:
    assert set(UNPRIVILEGED) <= {a.name for a in ATTACKS}


def test_the_suite_holds_issue_21s_attacks() -> None:
    assert set(OBSERVED) <= {a.name for a in ATTACKS}
