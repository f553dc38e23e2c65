"""ProcessSandbox says plainly that it is no security boundary, and it is not one."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks.escape_attacks import ATTACKS, run_attack, targets

from rsilab.sandbox import Mount, ProcessSandbox
from tests.sandbox.helpers import py


def test_describe_says_it_is_no_security_boundary() -> None:
    sandbox = ProcessSandbox()
    lines = sandbox.describe()
    assert not sandbox.is_security_boundary
    assert "NOT a security boundary" in lines[0]
    answers = {line.split(":")[0]: line.split(":", 1)[1].split()[0] for line in lines[1:]}
    assert answers == {
        "filesystem": "no",
        "network": "no",
        "user": "no",
        "limits": "rlimits",
        "disk": "no",
        "cgroups": "no",
    }


def test_every_result_carries_the_warning(tmp_path: Path) -> None:
    result = ProcessSandbox().run(py(tmp_path, "pass", hidden=(tmp_path / "x",)))
    assert any("not a security boundary" in note for note in result.notes)
    assert any("cannot hide" in note for note in result.notes)


def test_mounts_must_be_at_their_own_path(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"Mount\.same"):
        ProcessSandbox().run(py(tmp_path, "pass", mounts=(Mount(tmp_path, Path("/data")),)))
    result = ProcessSandbox().run(py(tmp_path, "pass", mounts=(Mount.same(tmp_path),)))
    assert result.ok


def test_the_escape_judges_catch_a_sandbox_that_does_not_isolate(tmp_path: Path) -> None:
    """The same attacks that BwrapSandbox contains get through here: the judges can fail.

    Only attacks that read are run: here they really act on the host, as rsilab's user.
    """
    wanted = {
        "read a private split outside the workspace",
        "read the lab database",
        "read rsilab's source",
        "connect to a service on the host's 127.0.0.1",
        "follow a symlink planted in the workspace",
        "make a user namespace (unshare -Ur)",
        "find host paths in /proc",
        "work in a folder that holds the lab",
    }
    sandbox = ProcessSandbox()
    with targets(tmp_path) as target:
        outcomes = [run_attack(sandbox, a, target) for a in ATTACKS if a.name in wanted]
    assert len(outcomes) == len(wanted)
    assert [o.attack for o in outcomes if o.contained] == []
