"""What the job and candidate tools need beyond the store: an executor and the controllers.

An :class:`ExperimentOS` built without :class:`LabServices` still serves every record tool;
tools that run jobs or judge candidates answer ``unavailable`` and say how to get them. One
``LabServices`` holds one executor for the agents' jobs and the controller's, a background
pool that judges candidates (agents poll ``candidate_status``), and the futures of jobs started
without waiting (``job_status``, ``cancel_job``). Its executor's jobs run in one runtime: the
task's own when the task declares one (:meth:`LabServices.use_task` binds it before the
executor is made; a second task needing another runtime is refused, never run in the wrong
one), else the base runtime. Its sandbox is bound to the lab
(:func:`lab_confinement`): jobs run as the lab's own sandbox uid, in workspaces made by
:meth:`LabServices.workspace`, which refuses a folder holding the lab.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from threading import Lock
from typing import Any

from rsilab.controller.host import HostController
from rsilab.errors import ToolError, UserError
from rsilab.executors import ExecutorChoice, RayExecutor
from rsilab.executors.base import Executor
from rsilab.executors.local import LocalExecutor, available_cores
from rsilab.expos.guards import WORKSPACE_RESERVED
from rsilab.records import Campaign, SystemVersion
from rsilab.sandbox import (
    BwrapSandbox,
    Confinement,
    ProcessSandbox,
    SandboxUser,
    check_placement,
    lab_user,
)
from rsilab.sandbox.base import Limits
from rsilab.sandbox.runtime import Runtime, current_runtime
from rsilab.sandbox.select import default_sandbox
from rsilab.store.artifacts import ArtifactStore, is_cache
from rsilab.store.keys import key_dir
from rsilab.store.lab import Lab
from rsilab.tasks import EXPERIMENT_LIMITS, SECRET_FILE, Task, checked_lab_secret, load_ref


class LabServices:
    """Executor, controllers and background work for the tools of one lab.

    ``executor`` defaults to a :class:`LocalExecutor` on the default sandbox, made on first
    use (so a face that never runs a job never probes the sandbox; bubblewrap, or plain
    processes only with ``allow_unsandboxed``); :meth:`close` shuts down
    what this object made. With ``judge_in_background`` False, ``propose_candidate`` returns
    only once the candidate is decided (for one-shot callers such as ``rsilab call``).
    """

    def __init__(
        self,
        lab: Lab,
        executor: Executor | None = None,
        *,
        lineage: str = "main",
        seeds: int = 3,
        job_limits: Limits | None = None,
        judge_in_background: bool = True,
        slots: int | None = None,
        allow_unsandboxed: bool = False,
        executor_choice: ExecutorChoice | None = None,
        runtime: Runtime | None = None,
    ) -> None:
        self.lab = lab
        self.executor_choice = executor_choice or ExecutorChoice()
        """The executor made on first use when none was given: local, or a Ray cluster."""
        self.lineage = lineage
        self.seeds = seeds
        self._default_limits = job_limits or EXPERIMENT_LIMITS
        self.job_limits = self._default_limits
        """The limits of experiment jobs of the task bound by :meth:`use_task` (see
        :meth:`limits_for`); a workspace made by the executor has its ``disk_mb``."""
        self.judge_in_background = judge_in_background
        self._executor = executor
        self._owns_executor = executor is None
        self._slots = slots
        self.allow_unsandboxed = allow_unsandboxed
        """A person opted in to plain-process jobs where bubblewrap cannot run."""
        self._runtime = runtime
        """The runtime jobs run in (None: the base one until :meth:`use_task` binds one)."""
        self._shown: tuple[Path, ...] = ()
        """Host paths every job sees read-only (a task's local model; bound by use_task)."""
        self._controllers: dict[tuple[str, str, str | None], HostController] = {}
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="rsilab-bg")
        self._futures: dict[str, Future[Any]] = {}
        self._workspaces: dict[Path, int] = {}
        """Workspaces made through :meth:`workspace`, and how many holds each has."""
        self._lock = Lock()

    @functools.cached_property
    def confinement(self) -> Confinement:
        """What this lab asks of its sandbox (see :func:`lab_confinement`)."""
        return lab_confinement(self.lab, self.job_limits.disk_mb)

    @property
    def executor(self) -> Executor:
        """The executor jobs run on (made on first use when none was given).

        Raises:
            SandboxUnavailable: no sandbox can be used on this machine.
        """
        with self._lock:
            if self._executor is None:
                slots = self._slots or min(2, available_cores())
                sandbox = default_sandbox(
                    allow_unsandboxed=self.allow_unsandboxed,
                    confinement=dataclasses.replace(
                        self.confinement, workspace_mb=self.job_limits.disk_mb
                    ),
                    runtime=self._runtime,
                    shown=self._shown,
                )
                if self.executor_choice.kind == "ray":  # fails closed: see rsilab.executors.ray
                    address = self.executor_choice.address
                    self._executor = RayExecutor(sandbox, self.lab.artifacts, address=address)
                else:
                    self._executor = LocalExecutor(sandbox, self.lab.artifacts, slots)
            return self._executor

    @property
    def runtime(self) -> Runtime:
        """The runtime this object's jobs run in (bound by :meth:`use_task`, else the base)."""
        sandbox = getattr(self._executor, "sandbox", None)  # made, or passed in
        if isinstance(sandbox, BwrapSandbox | ProcessSandbox):
            return sandbox.runtime
        return self._runtime or current_runtime()

    def use_task(self, task: Task) -> Runtime:
        """Bind the runtime ``task``'s jobs need (its own, installed; or the base one) before
        the executor is made, and return it; idempotent for tasks of one runtime.

        Raises:
            RuntimeMissingError: the task's own runtime is not installed (the hint names
                ``rsilab runtime install --task``).
            UserError: the executor already runs jobs in another runtime (a task of the base
                runtime is let through on an executor the caller passed in), or the task
                names a local model (:attr:`Task.model`) its jobs would not see.
        """
        own_runtime = task.own_runtime()
        own = own_runtime is not None
        wanted = own_runtime or current_runtime()
        shown = task.shown()
        with self._lock:
            if self._executor is None and self._owns_executor:
                self._runtime = wanted if own else None
                self._shown = shown
                self.job_limits = self.limits_for(task)
                return wanted
        if shown and not self._jobs_see(shown):
            raise UserError(
                f"task {task.name!r} names a local model ({task.model}) that this process's "
                "jobs do not see (its executor was made for another task)",
                "run each task with a local model in a process of its own, on the local executor",
            )
        held = self.runtime
        if held.path == wanted.path or (not own and not self._owns_executor):
            return held  # a base-runtime task on the caller's own executor: the caller's call
        raise UserError(
            f"task {task.name!r} needs the runtime at {wanted.path}, but this process "
            f"already runs its jobs in the one at {held.path}",
            "run each task whose runtime differs in a process of its own",
        )

    def limits_for(self, task: Task) -> Limits:
        """The limits of ``task``'s experiment jobs: this lab's defaults with the task's
        ``[limits]`` (:meth:`rsilab.tasks.Task.experiment_limits`)."""
        return task.experiment_limits(self._default_limits)

    def _jobs_see(self, paths: tuple[Path, ...]) -> bool:
        """Whether every job of the executor made or passed in sees ``paths`` read-only."""
        executor = self.executor
        if isinstance(executor, RayExecutor):  # each node's sandbox shows what it names
            return set(paths) <= set(executor.shown)
        sandbox = getattr(executor, "sandbox", None)
        if isinstance(sandbox, ProcessSandbox):
            return True  # a plain process sees every host path
        return isinstance(sandbox, BwrapSandbox) and set(paths) <= set(sandbox.shown)

    def isolation(self) -> tuple[str, bool]:
        """The sandbox jobs run in, and whether it is a security boundary (making the
        executor now: SandboxUnavailable when no sandbox may be used)."""
        executor = self.executor
        if isinstance(executor, LocalExecutor | RayExecutor):
            return executor.sandbox.name, executor.sandbox.is_security_boundary
        return type(executor).__name__, False  # unknown: not claimed to be a boundary

    def workspace(self, folder: Path, size_mb: int | None = None) -> Path:
        """Make ``folder`` a workspace of the lab's sandbox (idempotent; see
        :meth:`rsilab.sandbox.Sandbox.workspace`), held until :meth:`close`.

        Raises:
            WorkspaceRefused: the folder holds the lab or its key folder, or lies inside the
                lab outside its ``workspaces`` folder.
            SandboxUnavailable: no sandbox can be used on this machine.
            OSError: the workspace's filesystem could not be made.
        """
        check_placement(Path(folder), self.confinement)
        made = self.executor.workspace(Path(folder), size_mb)
        with self._lock:
            self._workspaces[made] = self._workspaces.get(made, 0) + 1
        return made

    @property
    def secret(self) -> bytes:
        """The lab's secret (splits, seeds); never a new one once a version was evaluated."""
        if (self.lab.path / SECRET_FILE).exists():  # the usual case: no query
            return checked_lab_secret(self.lab)
        drawn = bool(self.lab.store.query_as(SystemVersion, limit=1))
        return checked_lab_secret(self.lab, create=not drawn)

    def task_of(self, campaign: Campaign) -> Task:
        """The task a campaign works on, loaded from where it recorded
        (:func:`rsilab.tasks.load_ref`), its runtime bound (:meth:`use_task`).

        Raises:
            ToolError: ``unavailable``: the task cannot be loaded here (its file is gone or
                changed since the campaign started, or its name is not known), or its
                runtime is not installed or differs from the one this process's jobs run in.
        """
        try:
            task = load_ref(campaign.task, campaign_id=campaign.id)
            self.use_task(task)
            return task
        except UserError as exc:
            said = f"{exc.message} ({exc.hint})" if exc.hint else exc.message
            raise ToolError("unavailable", said) from None

    def controller(self, task: Task) -> HostController:
        """The controller of ``task``'s lineage: one per task reference (name, source,
        digest), made on first use, so two tasks of one name from different files never
        share one."""
        self.use_task(task)  # before the executor is made: its jobs run in the task's runtime
        executor = self.executor
        ref = task.ref()
        key = (ref.name, ref.source, ref.digest)
        with self._lock:
            found = self._controllers.get(key)
            if found is None:
                found = HostController(
                    self.lab, task, executor, lineage=self.lineage, seeds=self.seeds
                )
                self._controllers[key] = found
            return found

    def background(self, key: str, work: Callable[[], Any]) -> Future[Any]:
        """Run ``work`` on the background pool, remembered under ``key``."""
        future = self._pool.submit(work)
        with self._lock:
            self._futures[key] = future
        return future

    def future(self, key: str) -> Future[Any] | None:
        """The background work remembered under ``key``, if this process started it."""
        with self._lock:
            return self._futures.get(key)

    def close(self, wait: bool = True) -> None:
        """Finish (or, with ``wait`` False, drop) background work; shut down an executor this
        object made (one passed in belongs to the caller)."""
        self._pool.shutdown(wait=wait, cancel_futures=not wait)
        if self._executor is not None and self._owns_executor:
            self._executor.shutdown(wait=wait, cancel_pending=not wait)
        if self._executor is not None and wait:  # jobs still running keep theirs held
            with self._lock:
                held, self._workspaces = sorted(self._workspaces.items()), {}
            for folder, holds in held:
                with contextlib.suppress(OSError):  # left for the next process to release
                    for _ in range(holds):
                        self._executor.release_workspace(folder)


def lab_confinement(lab: Lab, workspace_mb: int) -> Confinement:
    """The lab's confinement: jobs run as its own sandbox uid (recorded in the lab) when
    rsilab is root, never reach the lab folder or the ledger key folder, and keep workspace
    images in ``<lab>/sandbox``; workspaces live in ``<lab>/workspaces`` unless a caller
    names another folder outside the lab."""
    root = lab.path.resolve()
    user = lab_user(root, lab.store.lab_id) if os.geteuid() == 0 else None
    return Confinement(
        user or SandboxUser(os.getuid(), os.getgid()),
        private=(root, key_dir().resolve()),
        workspaces=root / "workspaces",
        state=root / "sandbox",
        workspace_mb=workspace_mb,
    )


def snapshot_skipped(rel: PurePosixPath, name: str) -> bool:
    """Whether a snapshot of a workspace leaves out the entry at ``rel`` (named ``name``,
    everything under it too): :data:`WORKSPACE_RESERVED` at its root, and caches and bytecode
    (:func:`rsilab.store.artifacts.is_cache`) anywhere."""
    return (len(rel.parts) == 1 and name in WORKSPACE_RESERVED) or is_cache(name)


def snapshot_workspace(artifacts: ArtifactStore, workspace: Path) -> str:
    """Store the workspace as a tree artifact, leaving out what :func:`snapshot_skipped`
    names (the Experiment OS's data and job outputs are not part of the system, caches and
    bytecode are made again); returns its hash. What the controller judges is this tree.

    The workspace is stored in place, not copied first: the store's walk is iterative and
    bounded, follows no link and opens nothing but regular files (a job controls the tree).

    Raises:
        TreeRefused: the workspace holds a FIFO, socket or device, or a path deeper than
            :data:`rsilab.store.trees.MAX_TREE_DEPTH` (the message names it).
        LabError: the lab cannot be written.
    """
    return artifacts.put_tree(workspace, skip=snapshot_skipped).sha256
