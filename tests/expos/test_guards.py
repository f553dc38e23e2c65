"""The tool layer's own guards, called directly: every branch of the workspace-path guard with
the exact error an agent gets, and the reserved folders, named here as literals."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rsilab.errors import ToolError
from rsilab.expos.guards import GuardRefusal, resolve_workspace_path
from rsilab.expos.services import snapshot_workspace
from rsilab.records import FlagStage
from rsilab.store import ArtifactStore

RESERVED = ("data-in", "runs", ".rsilab")
"""The folders the Experiment OS writes: the data a job gets, job outputs, its own state."""
EXPECTED = "a path relative to the workspace root"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "m.py").write_text("x = 1\n")
    return folder


def _error(workspace: Path | None, value: str, *, must_exist: bool = True) -> ToolError:
    with pytest.raises(ToolError) as caught:
        resolve_workspace_path(workspace, value, "args.path", must_exist=must_exist)
    return caught.value


def test_relative_and_absolute_paths_inside_resolve(workspace: Path) -> None:
    inner = workspace / "src" / "m.py"
    assert resolve_workspace_path(workspace, "src/m.py", "p", must_exist=True) == inner
    assert resolve_workspace_path(workspace, str(inner), "p", must_exist=True) == inner
    assert resolve_workspace_path(workspace, "src/../src/m.py", "p", must_exist=True) == inner
    assert resolve_workspace_path(workspace, ".", "p", must_exist=True) == workspace
    new = resolve_workspace_path(workspace, "src/new.py", "p", must_exist=False)
    assert new == workspace / "src" / "new.py"


def test_no_workspace_is_a_refusal(workspace: Path) -> None:
    error = _error(None, "src/m.py")
    assert isinstance(error, GuardRefusal)
    assert (error.code, error.rule, error.stage) == (
        "guard_refused",
        "no_workspace",
        FlagStage.ACCESS,
    )
    assert error.message == "this call has no workspace, so it may not name any path"
    assert error.field == "args.path"


@pytest.mark.parametrize("value", ["..", "../outside.txt", "/etc/passwd", "src/../../x"])
def test_a_path_leaving_the_workspace_is_a_refusal(workspace: Path, value: str) -> None:
    error = _error(workspace, value, must_exist=False)
    assert isinstance(error, GuardRefusal)
    assert (error.code, error.rule, error.stage) == (
        "guard_refused",
        "path_outside_workspace",
        FlagStage.ACCESS,
    )
    assert error.message == (
        f"path {value!r} leaves the workspace; only paths inside it are allowed"
    )
    assert error.field == "args.path"


def test_a_link_out_of_the_workspace_is_a_refusal(workspace: Path) -> None:
    (workspace.parent / "secret.txt").write_text("s")
    os.symlink(workspace.parent / "secret.txt", workspace / "link")
    error = _error(workspace, "link")
    assert isinstance(error, GuardRefusal) and error.rule == "path_outside_workspace"


def test_a_nul_byte_is_invalid_not_a_refusal(workspace: Path) -> None:
    error = _error(workspace, "src/m\x00.py")
    assert not isinstance(error, GuardRefusal)
    assert (error.code, error.message, error.field) == (
        "invalid_arguments",
        "path contains a NUL byte",
        "args.path",
    )


def test_a_missing_path_is_not_found_unless_allowed(workspace: Path) -> None:
    error = _error(workspace, "src/gone.py")
    assert not isinstance(error, GuardRefusal)
    assert (error.code, error.message, error.field, error.expected) == (
        "not_found",
        "path 'src/gone.py' does not exist in the workspace",
        "args.path",
        EXPECTED,
    )


def test_a_path_that_cannot_be_looked_up_is_invalid(workspace: Path) -> None:
    value = "a" * 5000  # longer than any name the kernel takes
    error = _error(workspace, value)
    assert not isinstance(error, GuardRefusal)
    assert (error.code, error.field, error.expected) == (
        "invalid_arguments",
        "args.path",
        EXPECTED,
    )
    assert error.message == (f"path {value[:200]!r} cannot be looked up: File name too long")


def test_a_refusal_carries_its_rule_stage_field_and_code() -> None:
    refusal = GuardRefusal(rule="r", stage=FlagStage.TRAINING, message="m", field="f")
    assert (refusal.code, refusal.rule, refusal.stage, refusal.message, refusal.field) == (
        "guard_refused",
        "r",
        FlagStage.TRAINING,
        "m",
        "f",
    )
    other = GuardRefusal(rule="r", stage=FlagStage.ACCESS, message="m", code="permission_denied")
    assert other.code == "permission_denied" and other.field is None


def test_a_snapshot_leaves_out_the_reserved_folders(workspace: Path, tmp_path: Path) -> None:
    for folder in RESERVED:
        (workspace / folder).mkdir()
        (workspace / folder / "x.txt").write_text(folder)
    (workspace / "src" / "runs").mkdir()  # only top-level folders are reserved
    (workspace / "src" / "runs" / "kept.txt").write_text("k")
    (workspace / "runs.txt").write_text("a file named like a folder is kept")
    artifacts = ArtifactStore(tmp_path / "blobs")
    artifacts.ensure()
    sha = snapshot_workspace(artifacts, workspace)
    out = tmp_path / "out"
    artifacts.materialize(sha, out, "tree")
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert files == ["runs.txt", "src/m.py", "src/runs/kept.txt"]
