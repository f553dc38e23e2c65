"""The GPU path end to end: a user's model post-trained (SFT) and used (predict) on a GPU,
each job in bubblewrap with the GPU it was assigned; GPU time and memory peak printed.

On a lent GPU machine run ``bash benchmarks/gpu_check/run.sh`` (it installs the carried
files first, see docs/gpu.md); here ``python -m benchmarks.gpu_check --dry-run`` does the
same on CPU with ``gpus = 0``. Steps, each printed with its seconds:

1. **model**: a small Llama folder from a transformers config with a tokenizer trained
   locally (``tests/tasks/lm_model.py``), as a user's own downloaded model would be;
2. **task**: ``rsilab task init gpucheck --kind lm --model FOLDER``, then ``gpus = N`` in
   its harness.toml and a one-epoch SFT recipe in its config.json;
3. **runtime**: ``rsilab runtime adopt PYTHON --task gpucheck/task.toml`` (the machine's
   Python with its CUDA torch; nothing downloaded), kept under the work folder
   (``$RSILAB_RUNTIME``), never over the user's runtimes;
4. **preflight**, as ``rsilab run`` does it: the task's GPUs are there
   (:func:`rsilab.sandbox.require_gpus`) and the adopted runtime's torch is a CUDA build
   (:func:`rsilab.sandbox.require_cuda_torch`);
5. **jobs** through a :class:`~rsilab.executors.LocalExecutor` over a
   :class:`~rsilab.sandbox.BwrapSandbox` (never a weaker sandbox): a probe (which device
   nodes the job sees, what CUDA says), train on the train tier, predict on the target's
   dev tier, scored. Each job's resources are printed; the summary is written as JSON.

Exit 0 only when every step worked and, with GPUs, each job saw exactly its GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from tests.tasks.lm_model import make_model_folder

from rsilab.controller.jobs import job_spec
from rsilab.executors import JobResult, LocalExecutor
from rsilab.records import DataTier
from rsilab.sandbox import (
    BwrapSandbox,
    Limits,
    RunSpec,
    hand_over,
    require_cuda_torch,
    require_gpus,
)
from rsilab.sandbox.runtime import Runtime
from rsilab.store.artifacts import ArtifactStore
from rsilab.tasks import (
    DATA_DIR,
    Task,
    load_manifest,
    load_task,
    make_splits,
    parse_predictions,
    predict_spec,
    score_outputs,
    train_spec,
    write_data_dir,
)

PROBE = (
    "import json, os\n"
    "nodes = sorted(n for n in os.listdir('/dev') if n.startswith('nvidia'))\n"
    "import torch\n"
    "cuda = torch.cuda.is_available()\n"
    "print(json.dumps({'nodes': nodes, 'cuda': cuda, 'count': torch.cuda.device_count(),\n"
    "    'name': torch.cuda.get_device_name(0) if cuda else None, 'torch': torch.__version__,\n"
    "    'visible': os.environ.get('CUDA_VISIBLE_DEVICES')}))\n"
)
T = TypeVar("T")


def step(name: str, summary: dict[str, Any], work: Callable[[], T]) -> T:
    """Run one step, print and record its seconds."""
    print(f"== {name}", flush=True)
    started = time.monotonic()
    value = work()
    summary.setdefault("seconds", {})[name] = round(time.monotonic() - started, 1)
    print(f"   {name}: {summary['seconds'][name]} s", flush=True)
    return value


def rsilab(*args: str) -> str:
    """``rsilab ARGS`` with this Python (the one rsilab runs on); its stdout. Fails loudly."""
    done = subprocess.run(
        [sys.executable, "-m", "rsilab", *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"rsilab {' '.join(args)} failed: {done.stderr.strip()[-2000:]}")
    return done.stdout


def make_task(work: Path, gpus: int, hidden: int, layers: int) -> Path:
    model = make_model_folder(work / "my-model", hidden=hidden, layers=layers)
    rsilab("task", "init", str(work / "gpucheck"), "--kind", "lm", "--model", str(model))
    harness = work / "gpucheck" / "harness"
    manifest = harness / "harness.toml"
    manifest.write_text(manifest.read_text() + f"gpus = {gpus}\n")
    config = json.loads((harness / "config.json").read_text())
    config.update(epochs=1, lr=0.005, few_shot=1, max_new_tokens=6)
    config.update(dtype="bfloat16" if gpus else "float32")
    (harness / "config.json").write_text(json.dumps(config, indent=2))
    return work / "gpucheck" / "task.toml"


def adopt(task_toml: Path, python: str) -> Runtime:
    rsilab("runtime", "adopt", python, "--task", str(task_toml), "--force")
    runtime = load_task(str(task_toml)).runtime()
    if not runtime.is_installed():
        raise SystemExit(f"the adopted runtime at {runtime.path} is not installed")
    return runtime


def resources(result: JobResult) -> dict[str, Any]:
    used = result.resources
    return {
        "state": str(result.state),
        "wall_s": round(used.wall_s, 2),
        "cpu_s": round(used.cpu_s, 2),
        "peak_rss_mb": round(used.peak_rss_mb, 1),
        "gpu_s": None if used.gpu_s is None else round(used.gpu_s, 2),
        "gpu_memory_mb": used.gpu_memory_mb,
    }


def run(executor: LocalExecutor, name: str, spec: RunSpec) -> JobResult:
    result = executor.run(job_spec(name, spec))
    print(f"   {name}: {json.dumps(resources(result))}", flush=True)
    if not result.ok:
        stderr = executor.artifacts.read_bytes(result.stderr_sha256).decode(errors="replace")
        raise SystemExit(f"{name} job {result.state}: {stderr.strip()[-2000:]}")
    return result


def jobs(task: Task, executor: LocalExecutor, work: Path, gpus: int) -> dict[str, Any]:
    """Probe, train, predict: each a sandboxed job with ``gpus`` GPUs; what each reported."""
    out: dict[str, Any] = {}
    limits = Limits(cpu_s=1800, wall_s=900, memory_mb=24576 if gpus else 6144, disk_mb=2048)
    manifest = load_manifest(task.harness)
    workspace = executor.workspace(work / "workspace")
    shutil.copytree(task.harness, workspace, dirs_exist_ok=True)
    hand_over(workspace)  # what was copied there is the sandbox user's
    probe = RunSpec(("python", "-c", PROBE), workspace, limits, gpus=gpus)
    result = run(executor, "probe", probe)
    out["probe"] = json.loads(executor.artifacts.read_bytes(result.stdout_sha256))
    out["probe_resources"] = resources(result)
    print(f"   the probe job saw: {json.dumps(out['probe'])}", flush=True)
    secret = bytes(32)
    splits = {b.name: make_splits(task, b, secret) for b in task.benchmarks}
    train_tier = [s for sp in splits.values() for s in sp[DataTier.TRAIN]]
    write_data_dir(workspace / DATA_DIR, {DataTier.TRAIN: train_tier})
    hand_over(workspace)
    model = "model/model.safetensors"
    train = train_spec(manifest, workspace, data=DATA_DIR, model_out=model, seed=0, limits=limits)
    out["train"] = resources(run(executor, "train", train))
    target = next(b for b in task.benchmarks if b.target)
    samples = splits[target.name][DataTier.DEV]
    predict = predict_spec(manifest, workspace, samples, seed=0, model=model, limits=limits)
    result = run(executor, "predict", predict)
    out["predict"] = resources(result)
    outputs = parse_predictions(
        executor.artifacts.read_bytes(result.stdout_sha256), [s.id for s in samples]
    )
    scored = score_outputs(target.scorer, samples, outputs)
    out["dev_score"] = {target.name: sum(s.score for s in scored) / len(scored)}
    return out


def preflight(gpus: int, task: str, python: Path) -> None:
    """What ``rsilab run`` checks before a GPU task's first job (nothing with ``gpus`` 0)."""
    require_gpus(gpus, task)
    require_cuda_torch(gpus, task, python)


def verdict(found: dict[str, Any], gpus: int) -> list[str]:
    """What is wrong with the jobs' reports (empty: nothing)."""
    problems = []
    nodes = found["probe"]["nodes"]
    gpu_nodes = [n for n in nodes if n[len("nvidia") :].isdigit()]
    if len(gpu_nodes) != gpus:
        problems.append(f"the probe saw GPU nodes {gpu_nodes}, not exactly {gpus}")
    if gpus and not found["probe"]["cuda"]:
        problems.append("CUDA is not available inside the sandbox")
    for name in ("train", "predict"):
        used = found[name]
        if gpus and (used["gpu_s"] is None or used["gpu_s"] <= 0):
            problems.append(f"{name}: no GPU-seconds recorded")
        if not gpus and (used["gpu_s"] is not None or used["gpu_memory_mb"] is not None):
            problems.append(f"{name}: GPU fields recorded for a CPU job")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="On CPU here: gpus = 0.")
    parser.add_argument("--work", type=Path, help="Work folder (default: fresh, see below).")
    parser.add_argument("--python", help="The interpreter to adopt (default: this one).")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    args = parser.parse_args()
    gpus = 0 if args.dry_run else 1
    # Under /root on this machine, so adoption hard-links (same filesystem) instead of copying.
    work = (args.work or Path.home() / ".cache" / "rsilab-gpu-check").resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    os.environ["RSILAB_RUNTIME"] = str(work / "runtime")  # the adopted runtime lives here
    summary: dict[str, Any] = {"gpus": gpus, "dry_run": args.dry_run}
    started = time.monotonic()
    big = {"hidden": 256, "layers": 4} if gpus else {"hidden": 64, "layers": 2}
    task_toml = step("task", summary, lambda: make_task(work, gpus, **big))
    task = load_task(str(task_toml))
    runtime = step("runtime", summary, lambda: adopt(task_toml, args.python or sys.executable))
    step("preflight", summary, lambda: preflight(gpus, task.name, runtime.python))
    artifacts = ArtifactStore(work / "artifacts")
    artifacts.ensure()
    with BwrapSandbox(runtime=runtime) as sandbox:
        summary["sandbox"] = sandbox.describe()
        with LocalExecutor(sandbox, artifacts, slots=1) as executor:
            assert isinstance(executor, LocalExecutor)
            summary.update(step("jobs", summary, lambda: jobs(task, executor, work, gpus)))
    summary["total_s"] = round(time.monotonic() - started, 1)
    summary["problems"] = verdict(summary, gpus)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_check.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps({k: summary[k] for k in ("seconds", "total_s", "problems")}))
    if summary["problems"]:
        raise SystemExit("GPU check FAILED: " + "; ".join(summary["problems"]))
    print(f"GPU check passed ({'dry run, CPU' if args.dry_run else f'{gpus} GPU'})")


if __name__ == "__main__":
    main()
