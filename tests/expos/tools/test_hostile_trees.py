"""What an improver's job can leave in its workspace, met by the Experiment OS tools with real
jobs: a tree nested 1100 folders deep (deeper than Python's recursion limit), a FIFO, a unix
socket and a link loop. Each tool answers with one clear error naming the path (or lists
around it), never hangs, never fails with an internal error, and the lab goes on working for
other workspaces and for this one once the tree is gone."""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rsilab.executors.local import LocalExecutor
from rsilab.expos import CallContext, ExperimentOS, ToolResult, default_registry, open_campaign
from rsilab.expos.services import LabServices
from rsilab.records import Role
from rsilab.sandbox import Limits, ProcessSandbox, remove_tree
from rsilab.store import Lab
from rsilab.store.trees import MAX_TREE_DEPTH
from rsilab.tasks import get_task

NEST = """
import os
for _ in range(1100):
    os.makedirs('x', exist_ok=True)
    os.chdir('x')
open('bottom.txt', 'w').write('deep')
"""
FIFO = "import os\nos.mkfifo('fifo.txt')\n"


@pytest.fixture(autouse=True)
def _leave_no_deep_tree(tmp_path: Path) -> Iterator[None]:
    """pytest deletes old temporary folders with shutil.rmtree, which recurses per level."""
    yield
    remove_tree(tmp_path, keep_top=True)


class Lab2:
    """A lab with job services and two workers, each with a synthetic harness workspace."""

    def __init__(self, root: Path) -> None:
        self.lab = Lab.init(root / "lab")
        self.executor = LocalExecutor(ProcessSandbox(), self.lab.artifacts, slots=2)
        self.services = LabServices(
            self.lab, self.executor, job_limits=Limits(wall_s=60.0, cpu_s=60.0)
        )
        self.expos = ExperimentOS(
            self.lab.store, self.lab.artifacts, default_registry(), self.services
        )
        self.campaign = open_campaign(self.lab.store, get_task("synthetic").ref())
        self.spaces = {}
        for actor in ("attacker", "other"):
            self.spaces[actor] = root / actor
            shutil.copytree(get_task("synthetic").harness, self.spaces[actor])

    def call(self, actor: str, tool: str, **args: Any) -> ToolResult:
        role = Role.MAIN if tool == "create_direction" else Role.WORKER
        ctx = CallContext(f"{actor}-1", role, self.campaign.id, self.spaces[actor])
        pool = concurrent.futures.ThreadPoolExecutor(1)
        try:  # a tool that blocks (a FIFO opened) fails the test instead of hanging it
            return pool.submit(self.expos.call, ctx, tool, args).result(timeout=60)
        finally:
            pool.shutdown(wait=False)

    def ok(self, actor: str, tool: str, **args: Any) -> dict[str, Any]:
        result = self.call(actor, tool, **args)
        assert result.ok and result.value is not None, result.to_dict()
        return result.value

    def failed(self, actor: str, tool: str, **args: Any) -> str:
        result = self.call(actor, tool, **args)
        assert result.error is not None, result.to_dict()
        assert result.error.code != "internal_error", result.to_dict()
        return result.error.message

    def experiment(self, actor: str) -> str:
        direction = self.ok(actor, "create_direction", title="t", hypothesis="h")["id"]
        return str(
            self.ok(actor, "create_experiment", direction_id=direction, description="d")["id"]
        )

    def run(self, actor: str, code: str | None = None) -> tuple[str, ToolResult]:
        if code is not None:
            (self.spaces[actor] / "train.py").write_text(code)
        exp = self.experiment(actor)
        return exp, self.call(actor, "run_job", experiment_id=exp, kind="train")

    def close(self) -> None:
        self.services.close()
        self.executor.shutdown(cancel_pending=True)
        self.lab.close()


@pytest.fixture
def lab2(tmp_path: Path) -> Iterator[Lab2]:
    made = Lab2(tmp_path)
    yield made
    made.close()


def test_a_tree_nested_1100_deep_is_refused_clearly_and_the_lab_goes_on(lab2: Lab2) -> None:
    exp, ran = lab2.run("attacker", NEST)
    assert ran.error is None or ran.error.code != "internal_error", ran.to_dict()
    assert (lab2.spaces["attacker"] / "x" / "x").is_dir(), "the job really nested folders"
    said = lab2.failed("attacker", "finish_experiment", experiment_id=exp, status="succeeded")
    assert f"more than {MAX_TREE_DEPTH} levels deep" in said and "'x/x/x" in said
    listed = lab2.ok("attacker", "list_files", pattern="bottom.txt")
    assert listed["complete"] is False and f"{MAX_TREE_DEPTH} levels" in listed["note"]
    said = lab2.failed("attacker", "add_data", path="x", name="deep")
    assert f"more than {MAX_TREE_DEPTH} levels deep" in said
    # the other actor's work and the lab's own calls are untouched
    _, other = lab2.run("other")
    assert other.ok and other.value is not None and other.value["status"] == "succeeded"
    lab2.ok("other", "list_files")
    # and the faulty workspace recovers once a job (or a person) removes the tree
    _, cleaned = lab2.run("attacker", "import shutil\nshutil.rmtree('x')\n")  # 1100 deep: the
    assert cleaned.error is None or "Recursion" not in str(cleaned.to_dict())  # job's problem
    if (lab2.spaces["attacker"] / "x").exists():
        remove_tree(lab2.spaces["attacker"] / "x")
    done = lab2.ok("attacker", "finish_experiment", experiment_id=exp, status="succeeded")
    assert done["workspace_hash"]


def test_a_write_deeper_than_the_limit_is_refused(lab2: Lab2) -> None:
    said = lab2.failed("attacker", "write_file", path="d/" * 2000 + "f.txt", content="x")
    assert f"at most {MAX_TREE_DEPTH}" in said
    lab2.ok("attacker", "write_file", path="d/" * (MAX_TREE_DEPTH - 1) + "f.txt", content="x")
    assert lab2.ok("attacker", "list_files", pattern="f.txt")["matched"] == 1


def test_a_fifo_a_socket_and_a_link_loop_are_refused_never_opened(lab2: Lab2) -> None:
    exp, ran = lab2.run("attacker", FIFO)
    assert ran.error is None or ran.error.code != "internal_error", ran.to_dict()
    space = lab2.spaces["attacker"]
    assert (space / "fifo.txt").is_fifo(), "the job really made a FIFO"
    said = lab2.failed("attacker", "add_data", path="fifo.txt", name="pipe")
    assert "'fifo.txt' is a FIFO" in said
    said = lab2.failed("attacker", "finish_experiment", experiment_id=exp, status="succeeded")
    assert "'fifo.txt' is a FIFO" in said
    assert "not a regular file" in lab2.failed("attacker", "read_file", path="fifo.txt")
    os.unlink(space / "fifo.txt")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(space / "sock"))
        said = lab2.failed("attacker", "finish_experiment", experiment_id=exp, status="failed")
        assert "'sock' is a socket" in said
        assert "'sock' is a socket" in lab2.failed("attacker", "add_data", path="sock", name="s")
    os.unlink(space / "sock")
    (space / "loop").symlink_to("loop")
    assert "loop" in lab2.failed("attacker", "add_data", path="loop", name="l")
    assert any(e["path"] == "loop" for e in lab2.ok("attacker", "list_files")["entries"])
    done = lab2.ok("attacker", "finish_experiment", experiment_id=exp, status="succeeded")
    assert done["workspace_hash"]  # a link is recorded as a link, loop or not
    _, other = lab2.run("other")
    assert other.ok and other.value is not None and other.value["status"] == "succeeded"
