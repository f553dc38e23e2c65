"""LabServices' workspaces: never holding the lab, owned for good by the lab's sandbox user,
and written by the tools as that user's files."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from rsilab.executors.local import LocalExecutor
from rsilab.expos import CallContext, ExperimentOS, ToolResult, default_registry, open_campaign
from rsilab.expos.services import LabServices
from rsilab.records import Role
from rsilab.sandbox import ProcessSandbox, RunSpec, _images, lab_user
from rsilab.store import Lab
from rsilab.tasks import get_task
from tests.sandbox.helpers import bwrap_problem

SANDBOX_UID = 0x7000_0005


class _Bench:
    def __init__(self, root: Path, services: LabServices, lab: Lab) -> None:
        self.root, self.services, self.lab = root, services, lab
        self.expos = ExperimentOS(lab.store, lab.artifacts, default_registry(), services)
        self.campaign = open_campaign(lab.store, get_task("synthetic").ref())

    def call(self, tool: str, workspace: Path, **args: object) -> ToolResult:
        ctx = CallContext("worker-1", Role.WORKER, self.campaign.id, workspace)
        return self.expos.call(ctx, tool, args)


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[_Bench]:
    """The lab at ``<tmp>/lab``, jobs as plain processes (placement is checked before them)."""
    lab = Lab.init(tmp_path / "lab")
    executor = LocalExecutor(ProcessSandbox(), lab.artifacts)
    services = LabServices(lab, executor)
    yield _Bench(tmp_path, services, lab)
    services.close()
    executor.shutdown()
    lab.close()


def test_a_workspace_holding_the_lab_is_refused_by_the_tools(bench: _Bench) -> None:
    main = CallContext("main", Role.MAIN, bench.campaign.id)
    direction = bench.expos.call(main, "create_direction", {"title": "t", "hypothesis": "h"})
    assert direction.value is not None
    own = bench.lab.path / "workspaces" / "w-1"  # the one place inside the lab allowed
    own.mkdir(parents=True)
    exp = bench.call("create_experiment", own, direction_id=direction.value["id"], description="d")
    assert exp.value is not None
    exp_id = exp.value["id"]
    # a call that never touches its workspace (create_experiment records a config) runs from
    # any folder; every one that reads, writes or runs in it is refused
    elsewhere = bench.call(
        "create_experiment", bench.root, direction_id=direction.value["id"], description="d"
    )
    assert elsewhere.error is None, elsewhere.error
    for tool, args in [
        ("prepare_workspace", {}),
        ("write_file", {"path": "x.txt", "content": "x"}),
        ("list_files", {}),
        ("run_job", {"experiment_id": exp_id, "kind": "train"}),
    ]:
        error = bench.call(tool, bench.root, **args).error
        assert error is not None and error.code == "no_workspace", (tool, error)
        message = error.message
        assert f"workspace {bench.root} holds {bench.lab.path.resolve()}" in message
        assert "\n" not in message


def test_a_workspace_inside_the_lab_is_allowed_only_under_its_workspaces(bench: _Bench) -> None:
    lab = bench.lab.path.resolve()
    with pytest.raises(Exception, match="lies inside"):
        bench.services.workspace(lab / "blobs" / "x")
    made = bench.services.workspace(lab / "workspaces" / "cmp-1" / "worker-1")
    assert made.is_dir()


@pytest.mark.skipif(os.geteuid() != 0, reason="files go to another uid only as root")
def test_the_tools_write_files_the_workspace_owner_owns(bench: _Bench) -> None:
    """What ``rsilab agent``'s agent (the sandbox user) finds must be its own to edit."""
    workspace = bench.root / "ws"
    workspace.mkdir()
    (workspace / "old.txt").write_text("host's")
    os.chown(workspace, SANDBOX_UID, SANDBOX_UID)
    assert bench.call("write_file", workspace, path="a/b/new.txt", content="x").ok
    assert bench.call("write_file", workspace, path="old.txt", content="y").ok
    patch = "--- /dev/null\n+++ b/c.txt\n@@ -0,0 +1 @@\n+z\n"
    assert bench.call("apply_patch", workspace, patch=patch).ok
    for rel in ("a", "a/b", "a/b/new.txt", "old.txt", "c.txt"):
        assert (workspace / rel).stat().st_uid == SANDBOX_UID, rel


@pytest.mark.skipif(os.geteuid() != 0, reason="a lab's own sandbox uid exists only as root")
def test_a_lab_workspace_is_the_labs_sandbox_users_for_good(tmp_path: Path) -> None:
    if bwrap_problem() is not None:
        pytest.skip(f"bubblewrap is unusable here ({bwrap_problem()})")
    lab = Lab.init(tmp_path / "lab")
    services = LabServices(lab)
    try:
        bench = _Bench(tmp_path, services, lab)
        uid = lab_user(lab.path, lab.store.lab_id).uid
        folder = services.workspace(lab.path / "workspaces" / bench.campaign.id / "worker-1")
        assert folder.stat().st_uid == uid == services.confinement.user.uid
        assert (_images.mounted_image(folder) is not None) == _images.support().enforced
        assert bench.call("write_file", folder, path="config.json", content="{}").ok
        sandbox = services.executor.sandbox  # type: ignore[attr-defined]
        edit = (
            "f = open('config.json', 'r+'); f.write('[]'); f.close(); import os; print(os.getuid())"
        )
        result = sandbox.run(RunSpec(("python", "-c", edit), folder))
        assert result.ok and result.stdout.strip() == str(uid).encode(), result
    finally:
        services.close()
        lab.close()
    assert _images.mounted_source(folder) is None, "released when the services close"
    assert (folder / "config.json").read_text() == "[]"
    assert {p.stat().st_uid for p in [folder, *folder.iterdir()]} == {uid}
