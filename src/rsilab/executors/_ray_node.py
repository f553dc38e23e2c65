"""What runs on a Ray node: one job in the node's own bubblewrap sandbox, and the node check.

These functions are called inside Ray worker processes, which run the same Python and venv
as the head (the preflight's :func:`node_check` proves it by a digest). Their arguments and
results are JSON text and tar bytes (:mod:`._ray_bundle`); no rsilab object is pickled.

Each Ray worker process keeps one prepared :class:`~rsilab.sandbox.BwrapSandbox` (a fresh
sandbox uid of its own, as for any sandbox made without a lab). A job gets a scratch
workspace there (a size-limited filesystem, as root), its inputs unpacked into it and its
read-only mounts unpacked beside it, runs, and sends back what it changed. The scratch and
the mounts' copies are deleted when the job ends, whatever happened.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
import threading
from dataclasses import asdict, replace
from importlib import metadata
from pathlib import Path
from typing import Any

from rsilab.executors._ray_bundle import (
    MOUNTS,
    WORKSPACE,
    pack_changes,
    safe_unpack,
    snapshot,
)
from rsilab.executors.base import JobSpec
from rsilab.sandbox import BwrapSandbox, Mount, RunResult, current_runtime, hand_over
from rsilab.sandbox.owners import owned_prefix

_lock = threading.Lock()
_sandboxes: dict[str, BwrapSandbox] = {}


def node_sandbox() -> BwrapSandbox:
    """This worker process's prepared bubblewrap sandbox (made on first use).

    Raises:
        SandboxUnavailable: bubblewrap cannot run jobs on this node.
    """
    with _lock:
        found = _sandboxes.get("bwrap")
        if found is None:
            found = BwrapSandbox()
            found.prepare()
            _sandboxes["bwrap"] = found
        return found


def environment() -> dict[str, str]:
    """What must be the same on every node: the interpreter, rsilab's code, Ray, the runtime
    venv jobs see (its path and install stamp)."""
    runtime = current_runtime()
    stamp = runtime.stamp() or {}
    return {
        "python": sys.prefix,
        "python_version": sys.version,
        "rsilab": _package_digest(),
        "ray": metadata.version("ray"),
        "runtime": str(runtime.path),
        "runtime_key": str(stamp.get("key", "not installed")),
        "runtime_stdlib": str(stamp.get("stdlib", "")),
    }


def digest(env: dict[str, str]) -> str:
    """sha256 of an :func:`environment`, as canonical JSON."""
    return hashlib.sha256(json.dumps(env, sort_keys=True).encode()).hexdigest()


def _package_digest() -> str:
    """sha256 over rsilab's own source files (paths and bytes) as they are on disk now, so
    two nodes with different rsilab code never pass for the same (read at each check, not
    cached: the check compares what each node would load next)."""
    root = Path(__file__).resolve().parents[1]
    hashed = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            hashed.update(path.relative_to(root).as_posix().encode() + b"\0")
            hashed.update(hashlib.sha256(path.read_bytes()).digest())
    return hashed.hexdigest()


def node_check() -> str:
    """JSON: this node's :func:`environment`, and ``sandbox``: "" when bubblewrap runs a
    probe job here, else why not."""
    problem = ""
    try:
        node_sandbox()
    except Exception as exc:  # reported to the head, which refuses the cluster
        problem = f"{type(exc).__name__}: {exc}"
    return json.dumps({"environment": environment(), "sandbox": problem, "node": _node_id()})


def run_job(job_json: str, threads: int, inputs: bytes) -> tuple[str, bytes, bytes, bytes]:
    """Run one job here; returns (the RunResult's other fields as JSON, stdout, stderr, the
    tar of what it changed in its workspace, empty for a read-only workspace).

    Ray's ``ray.cancel`` (not forced) raises KeyboardInterrupt in this thread: the job is
    then cancelled through the sandbox, its tree killed, and its cancelled result returned.

    Raises:
        SandboxUnavailable: bubblewrap cannot run jobs on this node.
        SandboxError, ValueError: the sandbox refused or could not run the job.
    """
    job = JobSpec.model_validate_json(job_json)
    sandbox = node_sandbox()
    mounts_dir = Path(tempfile.mkdtemp(prefix=owned_prefix("ray-mounts")))
    try:
        with sandbox.scratch(job.limits.disk_mb, "ray-job") as workspace:
            safe_unpack(inputs, workspace, WORKSPACE)
            hand_over(workspace)
            safe_unpack(inputs, mounts_dir, MOUNTS)
            before = snapshot(workspace)
            mounts = tuple(
                Mount(mounts_dir / str(i), m.target, False) for i, m in enumerate(job.mounts)
            )
            spec = replace(job.run_spec(threads), workspace=workspace, mounts=mounts)
            result = _run_cancellable(sandbox, spec)
            changes = b"" if job.read_only_workspace else pack_changes(workspace, before)
    finally:
        shutil.rmtree(mounts_dir, ignore_errors=True)
    fields = {k: v for k, v in asdict(result).items() if k not in ("stdout", "stderr", "killed")}
    fields["killed"] = str(result.killed) if result.killed else None
    fields["node"] = _node_id()
    return json.dumps(fields), result.stdout, result.stderr, changes


def _node_id() -> str:
    import ray  # only ever called inside a Ray worker

    return str(ray.get_runtime_context().get_node_id())


def _run_cancellable(sandbox: BwrapSandbox, spec: Any) -> RunResult:
    """``sandbox.run(spec)`` on a helper thread, so a KeyboardInterrupt (Ray's cancel) in
    this one becomes the sandbox's own cancellation."""
    cancel = threading.Event()
    finished = threading.Event()
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["result"] = sandbox.run(replace(spec, cancel=cancel))
        except BaseException as exc:  # handed to the calling thread, raised there
            box["error"] = exc
        finally:
            finished.set()

    threading.Thread(target=work, name="rsilab-ray-job", daemon=True).start()
    # Waits on an Event, not Thread.join: a KeyboardInterrupt inside join() leaves the
    # thread marked as ended while it still runs (CPython 3.11).
    while not finished.is_set():
        try:
            finished.wait(0.2)
        except KeyboardInterrupt:
            cancel.set()
    if "error" in box:
        raise box["error"]
    result: RunResult = box["result"]
    return result
