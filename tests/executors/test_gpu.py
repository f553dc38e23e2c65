"""LocalExecutor's GPU jobs: distinct GPUs for jobs that run at once, turns on one GPU, and
GPU time and memory in a job's resources. Stand-in device nodes (mknod), no GPU needed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from rsilab.executors import JobSpec, LocalExecutor
from rsilab.sandbox import BwrapSandbox, Mount
from rsilab.store.artifacts import ArtifactStore
from tests.sandbox.gpu_nodes import make_dev_root
from tests.sandbox.helpers import QUICK, bwrap_problem

# -- through LocalExecutor and bubblewrap -----------------------------------------------------

# Each job marks its start (in-X) and end (out-X); it has "met" the other when it saw the
# other started and not ended. A job that met waits for the other to say so too (met-X), so
# neither leaves before both have seen each other.
_SEE = (
    "import json, os, sys, time\n"
    "me, other, wait = sys.argv[1], sys.argv[2], float(sys.argv[3])\n"
    "nodes = sorted(n for n in os.listdir('/dev') if n.startswith('nvidia'))\n"
    "has = lambda f: os.path.exists('/meet/' + f)\n"
    "mark = lambda f: open('/meet/' + f, 'w').close()\n"
    "mark('in-' + me)\n"
    "deadline, met = time.time() + wait, False\n"
    "while time.time() < deadline and not met:\n"
    "    met = has('in-' + other) and not has('out-' + other)\n"
    "    time.sleep(0.05)\n"
    "if met:\n"
    "    mark('met-' + me)\n"
    "    while time.time() < deadline and not has('met-' + other):\n"
    "        time.sleep(0.05)\n"
    "mark('out-' + me)\n"
    "print(json.dumps({'nodes': nodes, 'met': met}))\n"
)


@pytest.fixture
def gpu_executor(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    artifacts: ArtifactStore,
    request: pytest.FixtureRequest,
) -> Iterator[LocalExecutor]:
    if bwrap_problem() is not None:
        pytest.skip(f"bubblewrap is unusable here ({bwrap_problem()})")
    gpus = int(request.param)
    names = [f"nvidia{n}" for n in range(gpus)] + ["nvidiactl"]
    monkeypatch.setenv("RSILAB_GPU_DEV_ROOT", str(make_dev_root(tmp_path, names)))
    sandbox = BwrapSandbox()
    with LocalExecutor(sandbox, artifacts, slots=2) as made:
        assert isinstance(made, LocalExecutor)
        yield made
    sandbox.close()


def _jobs(executor: LocalExecutor, tmp_path: Path, wait_s: float) -> list[dict[str, object]]:
    meet = executor.workspace(tmp_path / "meet")
    specs = []
    for name, other in (("a", "b"), ("b", "a")):
        workspace = executor.workspace(tmp_path / name)
        specs.append(
            JobSpec(
                name=name,
                argv=["python", "-c", _SEE, name, other, str(wait_s)],
                workspace=workspace,
                limits=QUICK,
                mounts=[Mount(meet, Path("/meet"), writable=True)],
                gpus=1,
            )
        )
    results = executor.run_all(specs)
    seen = []
    for result in results:
        assert result.ok, executor.artifacts.read_bytes(result.stderr_sha256).decode()
        assert result.resources.gpu_s == pytest.approx(result.resources.wall_s)
        # No nvidia-smi and no driver files here: the memory peak is unmeasured, not zero.
        assert result.resources.gpu_memory_mb is None
        seen.append(json.loads(executor.artifacts.read_bytes(result.stdout_sha256)))
    return seen


@pytest.mark.parametrize("gpu_executor", [2], indirect=True)
def test_two_jobs_at_once_see_one_gpu_each(gpu_executor: LocalExecutor, tmp_path: Path) -> None:
    a, b = _jobs(gpu_executor, tmp_path, wait_s=20)
    assert a["met"] and b["met"]  # they ran at the same time
    assert {a["nodes"][0], b["nodes"][0]} == {"nvidia0", "nvidia1"}  # type: ignore[index]
    assert a["nodes"][1:] == b["nodes"][1:] == ["nvidiactl"]  # type: ignore[index]


@pytest.mark.parametrize("gpu_executor", [1], indirect=True)
def test_two_jobs_on_one_gpu_take_turns(gpu_executor: LocalExecutor, tmp_path: Path) -> None:
    a, b = _jobs(gpu_executor, tmp_path, wait_s=1.5)
    assert not a["met"] and not b["met"]  # two slots, one GPU: never at the same time
    assert a["nodes"] == b["nodes"] == ["nvidia0", "nvidiactl"]


@pytest.mark.parametrize("gpu_executor", [1], indirect=True)
def test_a_job_without_gpus_has_no_gpu_resources(
    gpu_executor: LocalExecutor, tmp_path: Path
) -> None:
    workspace = gpu_executor.workspace(tmp_path / "cpu")
    result = gpu_executor.run(
        JobSpec(name="cpu", argv=["python", "-c", "print(1)"], workspace=workspace, limits=QUICK)
    )
    assert result.ok
    assert result.resources.gpu_s is None and result.resources.gpu_memory_mb is None
