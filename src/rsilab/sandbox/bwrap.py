"""``BwrapSandbox``: bubblewrap namespaces, an unprivileged user, and a cgroup per job.

How one job starts (as root): a tiny ``sh`` gate blocks on a first stdin line until this
process has put it into the job's cgroups, then execs ``prlimit`` (core 0, file size, open
files), which execs ``bwrap``. bwrap reads its options from a file descriptor (``--args``),
so no host path appears in the command line a job can read at ``/proc/1/cmdline``. It
unshares the ipc, pid, net, uts and cgroup namespaces - not the user namespace: one made by
root would map the job's uid to host root - builds the filesystem of
:mod:`rsilab.sandbox._bwrap_args`, installs the seccomp filter of :mod:`._seccomp` (no new
user namespaces), lets unprivileged users bind any port in the job's own network namespace,
and runs ``setpriv``, which drops to the lab's sandbox uid/gid (:mod:`._identity`) with no
groups, capabilities or new privileges before exec-ing the job. So the job is an ordinary
unprivileged host uid, and every process it makes stays in the cgroups, which cap memory (and
swap) and processes, count CPU time, and freeze the tree to kill it.

The job writes only into workspaces (:mod:`._workspaces`): folders that belong to the sandbox
uid for good and, as root, are each a size-limited filesystem; nothing is chowned when a job
starts or ends. A workspace holding the lab or its key folder is refused.

Without root (no cgroups, no uid switch), bwrap makes a user namespace, the job keeps the
caller's uid, and limits fall back to per-process rlimits plus killing bwrap (its pid
namespace dies with it); the workspace is a plain folder whose size is polled, and its host
path shows in the job's ``/proc/self/mountinfo``. describe() and each RunResult's notes say so.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from rsilab.sandbox import _cgroup, _images, _seccomp
from rsilab.sandbox._bwrap_args import SANDBOX_HOME, WORKSPACE, Layout, write_files
from rsilab.sandbox._bwrap_watch import NO_CGROUP_NOTE, job_result, make_watch
from rsilab.sandbox._common import (
    FdArgs,
    job_env,
    processes_of,
    rlimit_args,
    validate,
)
from rsilab.sandbox._identity import SandboxUser, caller, ephemeral_user
from rsilab.sandbox._images import DiskLimits
from rsilab.sandbox._job_start import JOB_UMASK, default_signals_tool, with_default_signals
from rsilab.sandbox._places import Confinement, check_job, on_own_filesystem
from rsilab.sandbox._supervise import Supervised, supervise
from rsilab.sandbox._tree import TreeSampler
from rsilab.sandbox._workspaces import WorkspaceFs, remove_stale_scratch
from rsilab.sandbox.base import (
    Limits,
    Mount,
    RunResult,
    RunSpec,
    Sandbox,
    SandboxError,
    SandboxUnavailable,
)
from rsilab.sandbox.owners import owned_prefix, remove_tree
from rsilab.sandbox.runtime import Runtime, current_runtime

_GATE = 'read -r go && [ "$go" = go ] || exit 125; exec "$@"'
_RLIMIT_SET = re.compile(r"prlimit: failed to set the (\w+) resource limit")
"""prlimit's words when a job's rlimit is above the hard limit rsilab inherited."""
_ULIMIT = {  # prlimit's resource name -> (what it limits, the shell's `ulimit` flag)
    "NOFILE": ("open-files", "n"),
    "FSIZE": ("file-size", "f"),
    "CPU": ("CPU-time", "t"),
    "DATA": ("data-size", "d"),
    "NPROC": ("processes", "u"),
    "CORE": ("core-size", "c"),
}

_NAMESPACES = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
_SETPRIV_CAPS = ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
# Still root inside, in the job's own network namespace (loopback only): let the sandbox user
# bind ports below 1024 there, so `rsilab agent` can serve an LLM endpoint's port 443 on it.
# It reaches nothing more; where /proc/sys is read-only the job simply keeps the default.
_LOW_PORTS = '{ echo 0 > /proc/sys/net/ipv4/ip_unprivileged_port_start; } 2>/dev/null; exec "$@"'
_POLLED_DISK_NOTE = "disk: the workspace's size is polled, not a kernel limit"


class BwrapSandbox(Sandbox):
    """Jobs in bubblewrap; a security boundary (see the module docstring for the mechanism).

    Args:
        runtime: the runtime venv jobs see (default: :func:`current_runtime`).
        confinement: the lab's sandbox user, private folders and workspace images; without
            one, a fresh unused uid and temporary images that live as long as this object.
        use_cgroups: None picks cgroups when they can be made; False forces the fallback.
        hidden: host paths hidden from every job (added to each spec's ``hidden``).
        shown: host paths every job sees read-only at their own place (added to each spec's
            ``mounts``): a task's local model.
    """

    name = "bwrap"
    is_security_boundary = True

    def __init__(
        self,
        runtime: Runtime | None = None,
        *,
        confinement: Confinement | None = None,
        use_cgroups: bool | None = None,
        hidden: Sequence[Path] = (),
        shown: Sequence[Path] = (),
    ) -> None:
        self.runtime = runtime or current_runtime()
        self.shown = tuple(Path(p) for p in shown)
        self.root = os.geteuid() == 0
        self.confinement = confinement or Confinement(ephemeral_user())
        self.user: SandboxUser = self.confinement.user if self.root else caller()
        self.hidden = tuple(Path(p) for p in hidden)
        self._want_cgroups = use_cgroups
        self._lock = threading.Lock()
        self._layout: Layout | None = None
        self._cgroups = _cgroup.CgroupSupport({}, "not prepared")
        self._tools: dict[str, str] = {}
        self._files: Path | None = None
        self._fs: WorkspaceFs | None = None
        self._seccomp = b""

    @property
    def uid(self) -> int:
        """The uid jobs run as."""
        return self.user.uid

    @property
    def gid(self) -> int:
        """The gid jobs run as."""
        return self.user.gid

    # -- lifecycle ---------------------------------------------------------------------------

    def prepare(self) -> None:
        """Find bwrap, prlimit (and setpriv as root), the runtime and cgroups; clear what
        killed rsilab processes left (stale scratch mounts, orphaned workspaces of this lab);
        run a probe job.

        Idempotent and thread-safe.

        Raises:
            SandboxUnavailable: a tool or the runtime is missing, or the probe job failed.
        """
        with self._lock:
            if self._layout is not None:
                return
            self._tools = self._find_tools()
            default_signals_tool()  # a job must not inherit the signals this process ignores
            try:
                self._seccomp = _seccomp.no_userns_filter()
            except NotImplementedError as exc:
                raise SandboxUnavailable(
                    f"{exc}: jobs could make user namespaces here",
                    "run rsilab on x86-64 or aarch64, or opt in to unsandboxed jobs",
                ) from exc
            if not self.runtime.is_installed():
                raise SandboxUnavailable(
                    f"the runtime environment is not installed at {self.runtime.path}",
                    "run `rsilab runtime install` (make install does it)",
                )
            self._files = Path(tempfile.mkdtemp(prefix=owned_prefix("sandbox")))
            self._fs = self._workspaces(self._files)
            weakref.finalize(self, _clean_up, self._files, self._fs, self.confinement.state is None)
            write_files(self._files, self.uid, self.gid)
            if self._want_cgroups is False:
                self._cgroups = _cgroup.CgroupSupport({}, "cgroups turned off by the caller")
            else:
                self._cgroups = _cgroup.probe()
            layout = Layout(self._files, self.runtime.base_prefix(), self.runtime.path)
            self._probe(layout)
            self._layout = layout

    def _workspaces(self, files: Path) -> WorkspaceFs:
        fs = WorkspaceFs(self.confinement, self.confinement.state or files / "workspaces")
        if self.root:
            remove_stale_scratch()
            fs.release_orphans()
        return fs

    def _find_tools(self) -> dict[str, str]:
        names = ["bwrap", "prlimit"] + (["setpriv"] if self.root else [])
        tools = {name: shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin") for name in names}
        missing = [name for name, path in tools.items() if path is None]
        if missing:
            raise SandboxUnavailable(
                f"{', '.join(missing)} not found",
                "install bubblewrap and util-linux (as root: `apt-get install -y bubblewrap`, "
                "or `make system-deps`)",
            )
        return {name: path for name, path in tools.items() if path is not None}

    def _probe(self, layout: Layout) -> None:
        with tempfile.TemporaryDirectory(prefix=owned_prefix("probe")) as tmp:
            spec = RunSpec(
                argv=("python", "-I", "-c", "import os; print(os.getuid())"),
                workspace=Path(tmp),
                limits=Limits(cpu_s=20, wall_s=30, memory_mb=512, processes=16, disk_mb=16),
                read_only_workspace=True,
            )
            result = self._run(spec, layout)
        if not result.ok or result.stdout.strip() != str(self.uid).encode():
            said = result.stderr.decode(errors="replace").strip()
            hint = (
                "check that unprivileged user namespaces (or root) are allowed; "
                "RSILAB_SANDBOX=process uses the unsandboxed fallback"
            )
            short = _RLIMIT_SET.search(said)  # a hard limit of this shell is below a job's
            if short is not None:
                what, flag = _ULIMIT.get(short[1], (short[1], "a"))
                hint = (
                    f"the shell that started rsilab has a hard {what} limit below what a job "
                    f"gets; raise it (`ulimit -H{flag}`, or limits.conf) and run again"
                )
            raise SandboxUnavailable(
                "bubblewrap cannot start a job here: " + (said or f"exit {result.exit_code}"),
                hint,
            )

    @property
    def cgroups(self) -> bool:
        """Whether jobs get cgroups (valid after :meth:`prepare`)."""
        return self._cgroups.available

    def close(self) -> None:
        if self._files is not None and self._fs is not None:
            _clean_up(self._files, self._fs, self.confinement.state is None)
        if self._files is not None:
            remove_tree(self._files)
            self._files = None
            self._layout = None
            self._fs = None

    # -- workspaces --------------------------------------------------------------------------

    def _workspace_fs(self) -> WorkspaceFs:
        self.prepare()
        assert self._fs is not None
        return self._fs

    def workspace(self, folder: Path, size_mb: int | None = None) -> Path:
        return self._workspace_fs().ensure(folder, size_mb)

    def release_workspace(self, folder: Path) -> None:
        if self._fs is not None:
            self._fs.release(folder)

    @contextlib.contextmanager
    def scratch(self, size_mb: int | None = None, kind: str = "scratch") -> Iterator[Path]:
        with self._workspace_fs().scratch(size_mb, kind) as folder:
            yield folder

    def disk_limits(self) -> DiskLimits:
        return _images.support()

    # -- running -----------------------------------------------------------------------------

    def run(self, spec: RunSpec) -> RunResult:
        self.prepare()
        assert self._layout is not None
        return self._run(spec, self._layout)

    def _run(self, spec: RunSpec, layout: Layout) -> RunResult:
        if self.shown:
            gone = [p for p in self.shown if not p.exists()]
            if gone:
                raise SandboxError(
                    f"{gone[0]}, which every job of this sandbox sees (a task's local model), "
                    "is gone from the host: restore it, then resume"
                )
            spec = replace(spec, mounts=(*(Mount.same(p) for p in self.shown), *spec.mounts))
        workspace = validate(spec)
        for path in (layout.runtime, layout.base_prefix):
            if path.is_relative_to(workspace) or workspace.is_relative_to(path):
                raise ValueError(f"workspace {workspace} overlaps the runtime at {path}")
        check_job(spec, workspace, self.confinement, self.uid if self.root else None)
        args = self._args(spec, workspace, layout)
        cgroup = _cgroup.JobCgroup(self._cgroups) if self._cgroups.available else None
        try:
            if cgroup is not None:
                self._create(cgroup, spec.limits)
            tree = None if cgroup is not None else TreeSampler(0)
            with FdArgs(args, self._seccomp) as fds:
                argv = self._command(spec, fds)
                seen = self._launch(argv, fds.pass_fds, spec, workspace, cgroup, tree)
        finally:
            if cgroup is not None:
                cgroup.remove()
        note = self._disk_note(spec, workspace)
        notes = [note] if note else []
        return job_result(seen, cgroup, tree, notes, self._cgroups.reason)

    def _args(self, spec: RunSpec, workspace: Path, layout: Layout) -> list[str]:
        """bwrap's options, read from a file descriptor (see :class:`FdArgs`)."""
        env = job_env(
            spec, path=f"{layout.runtime}/bin:/usr/local/bin:/usr/bin:/bin", home=SANDBOX_HOME
        )
        args = [*_NAMESPACES, "--unshare-cgroup-try"]
        args += [] if self.root else ["--unshare-user", "--disable-userns"]
        args += ["--hostname", "sandbox", "--die-with-parent", "--new-session", "--clearenv"]
        for name, value in sorted(env.items()):
            args += ["--setenv", name, value]
        args += layout.args + layout.job_args(spec, workspace, (*self.hidden, *spec.hidden))
        return args + ([*_SETPRIV_CAPS] if self.root else [])

    def _command(self, spec: RunSpec, fds: FdArgs) -> list[str]:
        """gate, prlimit, bwrap --args FD --seccomp FD, then (as root) the port tweak and
        setpriv, then the job."""
        args = [self._tools["bwrap"], "--args", str(fds.args), "--seccomp", str(fds.seccomp)]
        args += ["--"]
        if self.root:
            args += ["/bin/sh", "-c", _LOW_PORTS, "rsilab-ports"]
            args += [self._tools["setpriv"], f"--reuid={self.uid}"]
            args += [f"--regid={self.gid}", "--clear-groups", "--inh-caps=-all"]
            args += ["--bounding-set=-all", "--no-new-privs", "--"]
        args += [*spec.argv]
        per_process = not self._cgroups.available
        nproc = processes_of(self.uid) + spec.limits.processes if per_process else None
        limits = rlimit_args(spec.limits, per_process=per_process, nproc=nproc)
        gate = ["/bin/sh", "-c", _GATE, "rsilab-gate", self._tools["prlimit"], *limits, *args]
        return with_default_signals(gate)

    def _disk_note(self, spec: RunSpec, workspace: Path) -> str | None:
        if spec.read_only_workspace or on_own_filesystem(workspace):
            return None
        return f"{_POLLED_DISK_NOTE} ({_images.support().reason})"

    def _create(self, cgroup: _cgroup.JobCgroup, limits: Limits) -> None:
        try:
            cgroup.create(limits.memory_mb, limits.processes)
        except OSError as exc:
            raise SandboxError(f"cannot create the job's cgroups: {exc}") from exc

    def _launch(
        self,
        argv: list[str],
        pass_fds: tuple[int, ...],
        spec: RunSpec,
        workspace: Path,
        cgroup: _cgroup.JobCgroup | None,
        tree: TreeSampler | None,
    ) -> Supervised:
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv,
                env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                umask=JOB_UMASK,  # whatever umask rsilab was started with
                pass_fds=pass_fds,
            )
        except OSError as exc:
            raise SandboxError(f"cannot start bwrap: {exc}") from exc
        if tree is not None:
            tree.root = proc.pid
        poll = self._disk_note(spec, workspace) is not None
        watch = make_watch(proc, spec, workspace, cgroup, tree, poll)
        assert proc.stdin is not None
        try:
            if cgroup is not None:
                cgroup.add(proc.pid)
            # The gate reads this line (byte by byte, so the job's stdin stays intact) and
            # only then execs: the job starts inside its cgroups.
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
        except OSError as exc:
            watch.kill()
            proc.wait()
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
            raise SandboxError(f"cannot put the job into its cgroups: {exc}") from exc
        return supervise(proc, spec.stdin, spec.limits, watch, started, spec.cancel, spec.on_output)

    def describe(self) -> list[str]:
        cgroups = self._cgroups.available
        disk = _images.support()
        who = (
            f"the lab's sandbox uid {self.uid}"
            if self.root
            else f"your uid {self.uid} in a user namespace"
        )
        return [
            "bwrap sandbox: a security boundary",
            f"filesystem: yes - an empty root with /usr, the runtime at {self.runtime.path} and "
            f"the Python it was made from, read-only; the workspace (at {WORKSPACE}) is the only "
            "writable host folder; private size-limited /tmp; no host path in /proc",
            "network: yes - a new network namespace with loopback only; no DNS",
            f"user: {'yes' if self.root else 'partly'} - jobs run as {who}, no capabilities, "
            "no new privileges, no new user namespaces (seccomp); other processes are "
            "invisible (own pid namespace)"
            + ("" if self.root else "; the workspace's host path shows in its mountinfo"),
            "limits: "
            + (
                "yes - memory, processes, CPU time for the whole tree (cgroups); wall time, "
                "output; killed with its parent"
                if cgroups
                else f"partly - {NO_CGROUP_NOTE}; wall time kills the whole tree"
            ),
            f"disk: {'yes' if disk.enforced else 'partly'} - {disk.reason}",
            "cgroups: "
            + (
                "yes - one per job, removed after it" if cgroups else f"no ({self._cgroups.reason})"
            ),
        ]


def _clean_up(files: Path, fs: WorkspaceFs, temporary: bool) -> None:
    """Release a lab-less sandbox's workspaces (their images live in ``files``), then
    delete ``files``: at close, or when the sandbox is collected or the program ends."""
    if temporary:
        fs.release_held()
    remove_tree(files)  # any depth, no recursion
