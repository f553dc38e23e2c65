"""The Ray executor's runtime: jobs and the node check name the task's runtime, and a node
whose runtime or base model differs from the head's is refused (no cluster needed here: the
node check's environment and the head's comparison are plain functions)."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from rsilab.executors import RayExecutor
from rsilab.executors._ray_cluster import RayRefused, _compare
from rsilab.executors._ray_node import describe, environment, runtime_of, shown_of
from rsilab.executors.base import JobSpec
from rsilab.sandbox import BwrapSandbox, Limits
from rsilab.sandbox.runtime import current_runtime, task_runtime
from rsilab.sandbox.runtime_built import built_files
from rsilab.store.artifacts import ArtifactStore
from rsilab.tasks import get_task
from tests.sandbox.fake_runtime import fake_task_runtime
from tests.sandbox.helpers import bwrap_problem, passable_folder

LM = ["transformers==5.24.0", "tokenizers==0.23.3"]
BASE = "share/rsilab-posttrain/base.safetensors"
"""Where posttrain's build step writes its base model inside the runtime."""


def test_the_base_runtime_is_described_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RSILAB_RUNTIME", raising=False)
    assert describe(current_runtime()) == ""
    assert runtime_of("") == current_runtime()


def test_a_task_runtime_is_found_again_from_its_description() -> None:
    runtime = task_runtime(LM, build_id="corpus 7")
    said = describe(runtime)
    assert json.loads(said) == {"extra": LM, "build_id": "corpus 7"}
    assert runtime_of(said) == runtime


def test_a_node_with_other_base_model_bytes_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RSILAB_RUNTIME", str(tmp_path / "rt"))
    runtime = fake_task_runtime(LM, b"the head's base model")
    ours = environment(describe(runtime))
    assert ours["runtime"] == str(runtime.path)
    head = hashlib.sha256(b"the head's base model").hexdigest()
    assert json.loads(ours["runtime_built"]) == {"base": head}, "read from the file on disk"
    (runtime.path / "share" / "base.bin").write_bytes(b"rebuilt on the node")
    theirs = environment(describe(runtime))
    _compare("node-a", ours, {"environment": ours, "sandbox": ""})  # the same: accepted
    with pytest.raises(RayRefused, match="runtime_built") as caught:
        _compare("node-b", ours, {"environment": theirs, "sandbox": ""})
    assert "--task T" in (caught.value.hint or "")


def _run_on_own_cluster(
    sandbox: BwrapSandbox, tmp_path: Path, code: str, memory_mb: int = 512
) -> tuple[RayExecutor, str]:
    """Start a cluster here for ``sandbox``, run ``python -c code`` as one job on it, stop
    the cluster; the executor and the job's stdout (the job must succeed)."""
    artifacts = ArtifactStore(tmp_path / "artifacts")
    artifacts.ensure()
    executor = RayExecutor(sandbox, artifacts, num_cpus=1)
    try:
        (tmp_path / "ws").mkdir()
        job = JobSpec(
            name="on-own-cluster",
            argv=["python", "-c", code],
            workspace=tmp_path / "ws",
            limits=Limits(wall_s=120, cpu_s=120, memory_mb=memory_mb),
            threads=1,
        )
        result = executor.run(job)
    finally:
        executor.shutdown()
        executor.cluster.close()
    assert result.ok, artifacts.read_bytes(result.stderr_sha256)
    return executor, artifacts.read_bytes(result.stdout_sha256).decode()


def test_a_job_runs_in_the_task_runtime_on_its_ray_node(tmp_path: Path) -> None:
    """A cluster started here, checked for posttrain's runtime; a job reads its base model
    there (needs the runtime installed and bubblewrap)."""
    runtime = get_task("posttrain").runtime()
    if not runtime.is_installed():
        pytest.skip(
            "posttrain's runtime is not installed (rsilab runtime install --task posttrain)"
        )
    expected = hashlib.sha256(Path(built_files(runtime)[0].path).read_bytes()).hexdigest()
    code = (
        "import hashlib, sys, transformers; base = sys.prefix + '/" + BASE + "'; "
        "print(sys.prefix, hashlib.sha256(open(base, 'rb').read()).hexdigest())"
    )
    executor, said = _run_on_own_cluster(BwrapSandbox(runtime), tmp_path, code, memory_mb=2048)
    assert json.loads(executor.runtime)["extra"] == list(runtime.extra)
    assert said.split() == [str(runtime.path), expected]


@pytest.fixture
def shared_model() -> Iterator[Path]:
    """A model folder every user can pass through, as on every node of a cluster."""
    with passable_folder("rsilab-ray-model-") as top:
        folder = top / "model"
        folder.mkdir(mode=0o755)
        (folder / "weights.safetensors").write_bytes(b"the same weights everywhere")
        (folder / "weights.safetensors").chmod(0o644)
        yield folder


def test_a_local_model_travels_in_the_descriptor_and_its_bytes_are_checked(
    shared_model: Path,
) -> None:
    base = current_runtime()
    assert describe(base) == "", "nothing to say: as before"
    said = describe(base, (shared_model,))
    assert shown_of(said) == (shared_model,) and runtime_of(said) == base
    ours = environment(said)
    files = {"weights.safetensors": b"the same weights everywhere"}
    expected = hashlib.sha256(
        "".join(
            f"{n}\0{len(d)}\0{hashlib.sha256(d).hexdigest()}\n" for n, d in files.items()
        ).encode()
    ).hexdigest()
    assert json.loads(ours["shown"]) == {str(shared_model): expected}
    _compare("node-a", ours, {"environment": ours, "sandbox": ""})
    (shared_model / "weights.safetensors").write_bytes(b"other weights on this node")
    theirs = environment(said)
    with pytest.raises(RayRefused, match="shown") as caught:
        _compare("node-b", ours, {"environment": theirs, "sandbox": ""})
    assert str(shared_model) in str(caught.value)
    shutil.rmtree(shared_model)
    assert json.loads(environment(said)["shown"]) == {str(shared_model): "missing"}


def test_a_job_on_a_ray_node_reads_the_local_model_where_it_is(
    tmp_path: Path, shared_model: Path
) -> None:
    """A cluster started here; the node's sandbox shows the model read-only at its path
    (nothing of it is copied into the job's inputs)."""
    if bwrap_problem() is not None:
        pytest.skip(f"bubblewrap is unusable here ({bwrap_problem()})")
    target = shared_model / "weights.safetensors"
    code = (
        f"p = {str(target)!r}; print(open(p, 'rb').read().decode())\n"
        "try:\n    open(p, 'ab')\nexcept OSError as e:\n    print('refused', e.errno)\n"
    )
    executor, text = _run_on_own_cluster(BwrapSandbox(shown=[shared_model]), tmp_path, code)
    assert executor.shown == (shared_model,)
    said = text.splitlines()
    assert said[0] == "the same weights everywhere"
    assert said[1] in ("refused 13", "refused 30"), said  # no permission, or a read-only bind
    assert (shared_model / "weights.safetensors").read_bytes() == b"the same weights everywhere"
