"""The Ray executor's runtime: jobs and the node check name the task's runtime, and a node
whose runtime or base model differs from the head's is refused (no cluster needed here: the
node check's environment and the head's comparison are plain functions)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from rsilab.executors import RayExecutor
from rsilab.executors._ray_cluster import RayRefused, _compare
from rsilab.executors._ray_node import describe, environment, runtime_of
from rsilab.executors.base import JobSpec
from rsilab.sandbox import BwrapSandbox, Limits
from rsilab.sandbox.runtime import current_runtime, task_runtime
from rsilab.sandbox.runtime_built import built_files
from rsilab.store.artifacts import ArtifactStore
from rsilab.tasks import get_task
from tests.sandbox.fake_runtime import fake_task_runtime

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


def test_a_job_runs_in_the_task_runtime_on_its_ray_node(tmp_path: Path) -> None:
    """A cluster started here, checked for posttrain's runtime; a job reads its base model
    there (needs the runtime installed and bubblewrap)."""
    runtime = get_task("posttrain").runtime()
    if not runtime.is_installed():
        pytest.skip(
            "posttrain's runtime is not installed (rsilab runtime install --task posttrain)"
        )
    expected = hashlib.sha256(Path(built_files(runtime)[0].path).read_bytes()).hexdigest()
    artifacts = ArtifactStore(tmp_path / "artifacts")
    artifacts.ensure()
    executor = RayExecutor(BwrapSandbox(runtime), artifacts, num_cpus=1)
    try:
        assert json.loads(executor.runtime)["extra"] == list(runtime.extra)
        code = (
            "import hashlib, sys, transformers; base = sys.prefix + '/" + BASE + "'; "
            "print(sys.prefix, hashlib.sha256(open(base, 'rb').read()).hexdigest())"
        )
        (tmp_path / "ws").mkdir()
        job = JobSpec(
            name="in-task-runtime",
            argv=["python", "-c", code],
            workspace=tmp_path / "ws",
            limits=Limits(wall_s=120, cpu_s=120, memory_mb=2048),
            threads=1,
        )
        result = executor.run(job)
    finally:
        executor.shutdown()
        executor.cluster.close()
    assert result.ok, artifacts.read_bytes(result.stderr_sha256)
    said = artifacts.read_bytes(result.stdout_sha256).decode().split()
    assert said == [str(runtime.path), expected]
