"""What runs on a Ray node: one job in the node's own bubblewrap sandbox, and the node check.

These functions are called inside Ray worker processes, which run the same Python and venv
as the head (the preflight's :func:`node_check` proves it by a digest). Their arguments and
results are JSON text and tar bytes (:mod:`._ray_bundle`); no rsilab object is pickled.

Each Ray worker process keeps one prepared :class:`~rsilab.sandbox.BwrapSandbox` (a fresh
sandbox uid of its own, as for any sandbox made without a lab). A job gets a scratch
workspace there (a size-limited filesystem, as root), its inputs unpacked into it and its
read-only mounts unpacked beside it, runs, and sends back what it changed. The scratch and
the mounts' copies are deleted when the job ends, whatever happened.

**Runtime.** A job runs in the runtime the head's executor was made for: the base runtime,
or a task's own, named by a *descriptor* (:func:`describe`: the task's requirement lines and
whether it has a build step), resolved on the node to the same keyed path. The node check
reports that runtime's path, stamp key and the sha256 of each file its build step wrote (a
base model), read from disk there, so the head refuses a node whose runtime or base model
differs from its own, before any job runs. A task's local model (paths the jobs see
read-only) travels in the descriptor too: each node's sandbox shows it at the same path, and
the check reports its content digest there and whether the node's sandbox user can read it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
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
from rsilab.sandbox.runtime import Runtime, task_runtime
from rsilab.sandbox.runtime_built import built_files, file_sha256
from rsilab.sandbox.shown import problem as shown_problem
from rsilab.sandbox.shown import tree_digest

_lock = threading.Lock()
_sandboxes: dict[str, BwrapSandbox] = {}


def describe(runtime: Runtime, shown: tuple[Path, ...] = ()) -> str:
    """The descriptor naming ``runtime`` on every node, and the host paths its jobs see
    read-only (a task's local model): "" for the base runtime and none, else JSON of its task
    requirement lines, the identity of the build step that made it (null: none) and, when
    there are any, the shown paths."""
    if not runtime.extra and not runtime.build_needed and not shown:
        return ""
    said: dict[str, Any] = {"extra": list(runtime.extra), "build_id": runtime.build_id}
    if shown:
        said["shown"] = [str(p) for p in shown]
    return json.dumps(said)


def shown_of(descriptor: str) -> tuple[Path, ...]:
    """The host paths a :func:`describe` descriptor says jobs see read-only."""
    if not descriptor:
        return ()
    return tuple(Path(str(p)) for p in json.loads(descriptor).get("shown", []))


def runtime_of(descriptor: str) -> Runtime:
    """The runtime a :func:`describe` descriptor names, on this node (installed or not)."""
    if not descriptor:
        return current_runtime()
    data = json.loads(descriptor)
    build_id = data["build_id"]
    return task_runtime(
        [str(x) for x in data["extra"]], build_id=None if build_id is None else str(build_id)
    )


def node_sandbox(descriptor: str = "") -> BwrapSandbox:
    """This worker process's prepared bubblewrap sandbox for the runtime ``descriptor``
    names (made on first use).

    Raises:
        SandboxUnavailable: bubblewrap cannot run jobs on this node, or the runtime is not
            installed here.
    """
    with _lock:
        found = _sandboxes.get(descriptor)
        if found is None:
            found = BwrapSandbox(runtime_of(descriptor), shown=shown_of(descriptor))
            found.prepare()
            _sandboxes[descriptor] = found
        return found


def _built_digests(runtime: Runtime) -> str:
    """JSON: the sha256 of each file the runtime's build step wrote, as on disk now."""
    digests = {}
    for found in built_files(runtime):
        try:
            digests[found.name] = file_sha256(found.path)
        except OSError as exc:
            digests[found.name] = f"unreadable: {exc.strerror}"
    return json.dumps(digests, sort_keys=True)


def _shown_digests(descriptor: str) -> str:
    """JSON: the content digest of each shown path (a local model), as on disk now."""
    digests = {}
    for path in shown_of(descriptor):
        try:
            digests[str(path)] = tree_digest(path).sha256 if path.exists() else "missing"
        except OSError as exc:
            digests[str(path)] = f"unreadable: {exc.strerror}"
    return json.dumps(digests, sort_keys=True)


def environment(descriptor: str = "") -> dict[str, str]:
    """What must be the same on every node: the interpreter, rsilab's code, Ray, the runtime
    venv jobs see (its path, install stamp and built files' sha256) and the bytes of the paths
    jobs see read-only (a task's local model; the key is there only when there are some)."""
    runtime = runtime_of(descriptor)
    stamp = runtime.stamp() or {}
    shown = {"shown": _shown_digests(descriptor)} if shown_of(descriptor) else {}
    return {
        **shown,
        "python": sys.prefix,
        "python_version": sys.version,
        "rsilab": _package_digest(),
        "ray": metadata.version("ray"),
        "runtime": str(runtime.path),
        "runtime_key": str(stamp.get("key", "not installed")),
        "runtime_stdlib": str(stamp.get("stdlib", "")),
        "runtime_built": _built_digests(runtime),
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


def node_check(descriptor: str) -> str:
    """JSON: this node's :func:`environment` for the runtime ``descriptor`` names, and
    ``sandbox``: "" when bubblewrap runs a probe job here in that runtime, else why not."""
    problem = ""
    try:
        sandbox = node_sandbox(descriptor)
        for path in shown_of(descriptor):  # the node's own sandbox user must read it
            problem = problem or shown_problem(path, sandbox.uid, sandbox.gid) or ""
    except Exception as exc:  # reported to the head, which refuses the cluster
        problem = f"{type(exc).__name__}: {exc}"
    env = environment(descriptor)
    return json.dumps({"environment": env, "sandbox": problem, "node": _node_id()})


def run_job(
    job_json: str, threads: int, inputs: bytes, descriptor: str
) -> tuple[str, bytes, bytes, bytes]:
    """Run one job here, in the runtime ``descriptor`` names; returns (the RunResult's
    other fields as JSON, stdout, stderr, the tar of what it changed in its workspace, empty
    for a read-only workspace).

    Ray's ``ray.cancel`` (not forced) raises KeyboardInterrupt in this thread: the job is
    then cancelled through the sandbox, its tree killed, and its cancelled result returned.

    Raises:
        SandboxUnavailable: bubblewrap cannot run jobs on this node.
        SandboxError, ValueError: the sandbox refused or could not run the job.
    """
    job = JobSpec.model_validate_json(job_json)
    sandbox = node_sandbox(descriptor)
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
            with _interruptible():
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


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """Let ``ray.cancel`` reach the job for the block, then put SIGINT's handling back.

    Ray's cancel raises KeyboardInterrupt through ``_thread.interrupt_main``, which does nothing
    while SIGINT is ignored or at its default action: in a worker of a node started under
    ``nohup``-like conditions (a shell without job control ignores SIGINT in what it starts in
    the background, and workers inherit it). So while the job runs, the main thread's SIGINT
    gets Python's own handler. A task run outside the main thread cannot set it and is left
    as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


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
