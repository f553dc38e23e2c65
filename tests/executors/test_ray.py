"""The Ray executor on a real two-node Ray cluster (see ``ray_cluster.py``).

Every job here asks for the custom resource only the second node offers, so it runs there,
in a mount namespace where the folder holding the test's lab, workspaces and artifact store
is covered by an empty tmpfs: whatever the job reads came through the executor, and what it
wrote reaches the head only through the executor and the artifact store.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray

from rsilab.controller.host import HostController
from rsilab.controller.jobs import new_job, run_recorded_job
from rsilab.executors import JobState, RayExecutor
from rsilab.executors._ray_cluster import (
    RayRefused,
    check_authenticated,
    check_nodes,
    probe_without_token,
)
from rsilab.records import Job, JobInputs, JobKind, JobStatus, Role
from rsilab.sandbox import BwrapSandbox, KillReason, Limits, RunSpec
from rsilab.store import Lab
from rsilab.tasks import get_task
from tests.executors.ray_cluster import NODE2, RayCluster
from tests.sandbox.helpers import bwrap_problem, wait_until

QUICK = Limits(cpu_s=60, wall_s=120, memory_mb=512, processes=64, disk_mb=64, file_mb=32)

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="the second node needs its own mount namespace (root and unshare)",
)


@pytest.fixture(scope="module")
def hidden() -> Iterator[Path]:
    """The folder holding the head's labs and workspaces; the second node sees it empty."""
    if bwrap_problem() is not None:
        pytest.skip(f"bubblewrap is unusable here ({bwrap_problem()})")
    folder = Path(f"/tmp/rsilab-ray-head-{os.getpid()}")
    folder.mkdir(mode=0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(hidden: Path) -> Iterator[RayCluster]:
    made = RayCluster(hidden)
    try:
        made.start()
        yield made
    finally:
        made.stop()


@pytest.fixture(scope="module")
def executor(cluster: RayCluster, hidden: Path) -> Iterator[RayExecutor]:
    """A Ray executor joined to the cluster with its token; every job asks for NODE2."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_AUTH_TOKEN", cluster.token)
        sandbox = BwrapSandbox()
        artifacts_lab = Lab.init(hidden / "artifacts-lab")
        made = RayExecutor(
            sandbox, artifacts_lab.artifacts, address=cluster.address, resources={NODE2: 1}
        )
        try:
            yield made
        finally:
            made.shutdown()
            artifacts_lab.close()
            sandbox.close()


@pytest.fixture
def lab(hidden: Path, request: pytest.FixtureRequest) -> Iterator[Lab]:
    opened = Lab.init(hidden / f"lab-{request.node.name}")
    yield opened
    opened.close()


def alive_nodes() -> list[dict[str, Any]]:
    """Ray's records of the alive nodes."""
    return [n for n in ray.nodes() if n.get("Alive")]  # type: ignore[no-untyped-call]


def node2_busy() -> bool:
    """Whether a task holds the second node's NODE2 resource now."""
    free: dict[str, float] = ray.available_resources()  # type: ignore[no-untyped-call]
    return free.get(NODE2, 0.0) == 0.0


def node2_id() -> str:
    """The id of the node offering NODE2, as Ray lists it."""
    found = [n["NodeID"] for n in alive_nodes() if NODE2 in n["Resources"]]
    assert len(found) == 1, found
    return str(found[0])


def test_the_second_node_cannot_see_the_heads_files(executor: RayExecutor, hidden: Path) -> None:
    marker = hidden / "marker"
    marker.write_text("head only")
    exists = ray.remote(os.path.exists)
    on_node2 = exists.options(resources={NODE2: 1}, num_cpus=0, max_retries=0)
    assert ray.get(on_node2.remote(str(marker)), timeout=60) is False
    assert marker.exists()


def test_preflight_checked_every_alive_node(executor: RayExecutor) -> None:
    alive = {n["NodeID"] for n in alive_nodes()}
    assert len(alive) == 2
    assert set(executor.cluster.nodes) == alive


def test_a_job_runs_on_the_second_node_and_its_model_reaches_the_artifact_store(
    executor: RayExecutor, lab: Lab, hidden: Path
) -> None:
    workspace = executor.workspace(hidden / "ws-model")
    (workspace / "data.txt").write_text("3\n4\n")
    (workspace / "old.txt").write_text("to be removed by the job")
    (workspace / "sub").mkdir()
    code = (
        "import json, os\n"
        "total = sum(int(x) for x in open('data.txt').read().split())\n"
        "open('model.json', 'w').write(json.dumps({'sum': total}))\n"
        "open('sub/note.txt', 'w').write('written on the node')\n"
        "os.remove('old.txt')\n"
        "print('trained')\n"
    )
    spec = RunSpec(argv=("python", "-c", code), workspace=workspace, limits=QUICK)
    job = new_job(
        JobKind.TRAIN,
        JobInputs(workspace_sha256="0" * 64, seed=1),
        campaign_id=None,
        actor="worker-1",
        model_out="model.json",
    )
    done, result = run_recorded_job(
        lab.store, lab.artifacts, executor, job, spec, actor="worker-1", role=Role.WORKER
    )
    expected = json.dumps({"sum": 7}).encode()
    assert result is not None and result.state is JobState.SUCCEEDED, result
    assert f"ran on Ray node {node2_id()}" in result.notes
    assert done.status is JobStatus.SUCCEEDED
    assert done.model_out_sha256 == hashlib.sha256(expected).hexdigest()
    assert lab.artifacts.read_bytes(done.model_out_sha256) == expected
    assert executor.artifacts.read_bytes(result.stdout_sha256) == b"trained\n"
    assert (workspace / "sub" / "note.txt").read_text() == "written on the node"
    assert not (workspace / "old.txt").exists()
    assert (workspace / "data.txt").read_text() == "3\n4\n"


def test_a_read_only_mount_travels_with_the_job(
    executor: RayExecutor, hidden: Path, tmp_path: Path
) -> None:
    from rsilab.executors import JobSpec
    from rsilab.sandbox import Mount

    data = hidden / "mounted-data"
    data.mkdir()
    (data / "x.txt").write_text("from the head")
    workspace = executor.workspace(hidden / "ws-mount")
    job = JobSpec(
        name="mount-job",
        argv=["python", "-c", f"print(open('{data}/x.txt').read())"],
        workspace=workspace,
        limits=QUICK,
        mounts=[Mount.same(data)],
    )
    result = executor.run(job)
    assert result.ok, result
    assert executor.artifacts.read_bytes(result.stdout_sha256) == b"from the head\n"


def test_a_hidden_path_is_never_sent_to_the_node(executor: RayExecutor, hidden: Path) -> None:
    from rsilab.executors import JobSpec

    workspace = executor.workspace(hidden / "ws-hidden")
    (workspace / "secret.txt").write_text("private tier")
    (workspace / "public.txt").write_text("train tier")
    code = "import os; print(os.path.exists('secret.txt'), os.path.exists('public.txt'))"
    job = JobSpec(
        name="hidden-job",
        argv=["python", "-c", code],
        workspace=workspace,
        limits=QUICK,
        hidden=[workspace / "secret.txt"],
    )
    result = executor.run(job)
    assert result.ok, result
    assert executor.artifacts.read_bytes(result.stdout_sha256) == b"False True\n"
    assert (workspace / "secret.txt").read_text() == "private tier"  # kept here, untouched


def test_a_job_over_its_own_memory_limit_is_the_jobs_limit_not_rays(
    executor: RayExecutor, hidden: Path
) -> None:
    from rsilab.executors import JobSpec

    workspace = executor.workspace(hidden / "ws-memory")
    hog = "x = bytearray(400 * 1024 * 1024); x[::4096] = b'1' * len(x[::4096]); print('alive')"
    limits = Limits(cpu_s=60, wall_s=60, memory_mb=96, processes=32, disk_mb=32)
    result = executor.run(
        JobSpec(name="memory-hog", argv=["python", "-c", hog], workspace=workspace, limits=limits)
    )
    assert result.state is JobState.KILLED
    assert result.kill_reason is KillReason.MEMORY
    assert f"ran on Ray node {node2_id()}" in result.notes


def _processes_with(mark: str) -> list[int]:
    """Pids whose command line holds ``mark`` (a job's argv shows in the host's /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if mark.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_cancel_kills_a_running_job_on_its_node(executor: RayExecutor, hidden: Path) -> None:
    from rsilab.executors import JobSpec

    mark = f"rsilab-ray-cancel-{uuid.uuid4().hex}"
    workspace = executor.workspace(hidden / "ws-cancel")
    job = JobSpec(
        name="sleeper",
        argv=["python", "-c", f"import time; time.sleep(120)  # {mark}"],
        workspace=workspace,
        limits=QUICK,
    )
    future = executor.submit(job)
    assert wait_until(lambda: bool(_processes_with(mark)), 60)  # running in its sandbox
    started = time.monotonic()
    assert executor.cancel("sleeper") is True
    result = future.result(timeout=60)
    assert result.state is JobState.KILLED
    assert result.kill_reason is KillReason.CANCELLED
    assert time.monotonic() - started < 30
    assert wait_until(lambda: not _processes_with(mark), 30)
    assert executor.cancel("sleeper") is False


def test_preflight_refuses_a_cluster_without_token_authentication(
    cluster: RayCluster, hidden: Path
) -> None:
    assert probe_without_token(cluster.address) == "refused"
    open_cluster = RayCluster(hidden, auth=False)
    try:
        open_cluster.start(node2=False)
        assert probe_without_token(open_cluster.address) == "answered"
        with pytest.raises(RayRefused, match="answers clients without a token"):
            check_authenticated(open_cluster.address)
    finally:
        open_cluster.stop()


def test_preflight_refuses_without_a_token(
    cluster: RayCluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(RayRefused, match="no Ray authentication token"):
        check_authenticated(cluster.address)


def test_preflight_refuses_a_node_with_another_runtime(
    executor: RayExecutor, cluster: RayCluster
) -> None:
    odd = cluster.start_node({"rsilab_test_odd": 1}, "odd", {"RSILAB_RUNTIME": "/nonexistent"})
    try:
        cluster.wait_for(3)
        with pytest.raises(RayRefused, match="runtime") as caught:
            check_nodes()
        assert "'/nonexistent'" in str(caught.value)
    finally:
        cluster._stop(odd)
    assert wait_until(lambda: len(alive_nodes()) == 2, 60)


@pytest.fixture
def slow_synthetic(tmp_path: Path) -> object:
    """The synthetic task with a train that first sleeps 2 s, so a node can die under it."""
    task = get_task("synthetic")
    harness = tmp_path / "harness"
    shutil.copytree(task.harness, harness)
    train = harness / "train.py"
    train.write_text("import time\ntime.sleep(2)\n" + train.read_text())
    return task.model_copy(update={"harness": harness})


@pytest.mark.timeout(600)  # a baseline and a node's restart, on a loaded machine
def test_a_job_whose_node_dies_is_interrupted_and_its_seed_runs_again_in_the_same_baseline(
    executor: RayExecutor,
    cluster: RayCluster,
    lab: Lab,
    slow_synthetic: object,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rsilab.controller.lineage import find_lineage
    from rsilab.tasks import Task

    assert isinstance(slow_synthetic, Task)
    monkeypatch.setattr(executor, "artifacts", lab.artifacts)  # the controller reads logs there
    controller = HostController(lab, slow_synthetic, executor)
    ended: list[object] = []

    def baseline() -> None:
        try:
            ended.append(controller.baseline(actor="test"))
        except BaseException as exc:
            ended.append(exc)

    def running() -> list[Job]:
        return [j for j in lab.store.query_as(Job) if j.status is JobStatus.RUNNING]

    attempt = threading.Thread(target=baseline)
    attempt.start()
    assert wait_until(lambda: node2_busy() and bool(running()), 120)
    cluster.kill_node2()
    cluster.start_node2()  # the baseline's other seeds wait for a node offering NODE2
    attempt.join(timeout=400)
    assert not attempt.is_alive()
    jobs = lab.store.query_as(Job)
    assert len(ended) == 1 and not isinstance(ended[0], BaseException), (
        ended,
        [(j.kind, j.status, j.error[:80]) for j in jobs],
    )
    assert find_lineage(lab.store, "synthetic", "main") is not None
    assert ended[0].label == "H0/M0"  # type: ignore[attr-defined]
    interrupted = [j for j in jobs if j.status is JobStatus.INTERRUPTED]
    assert interrupted and all("Ray node" in j.error for j in interrupted), interrupted
    assert not [j for j in jobs if j.status is JobStatus.RUNNING]
    for lost in interrupted:  # the same seed ran again, later, and succeeded
        again = [
            j
            for j in jobs
            if j.kind == lost.kind
            and j.inputs.seed == lost.inputs.seed
            and j.status is JobStatus.SUCCEEDED
            and j.created_at >= lost.created_at
        ]
        assert again, (lost.kind, lost.inputs.seed)
