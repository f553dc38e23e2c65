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
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path

from rsilab.sandbox import _cgroup, _images, _seccomp
from rsilab.sandbox._bwrap_args import SANDBOX_HOME, WORKSPACE, Layout, write_files
from rsilab.sandbox._common import (
    DiskWatch,
    FdArgs,
    decode_status,
    job_env,
    kill_reason_of_signal,
    processes_of,
    rlimit_args,
    validate,
)
from rsilab.sandbox._identity import SandboxUser, caller, ephemeral_user
from rsilab.sandbox._images import DiskLimits
from rsilab.sandbox._supervise import Supervised, Watch, supervise
from rsilab.sandbox._tree import TreeSampler
from rsilab.sandbox._workspaces import (
    Confinement,
    WorkspaceFs,
    WorkspaceRefused,
    check_placement,
    on_own_filesystem,
    owned_by,
    remove_stale_scratch,
)
from rsilab.sandbox.base import (
    KillReason,
    Limits,
    RunResult,
    RunSpec,
    Sandbox,
    SandboxError,
    SandboxUnavailable,
)
from rsilab.sandbox.owners import owned_prefix
from rsilab.sandbox.runtime import Runtime, current_runtime

_GATE = 'read -r go && [ "$go" = go ] || exit 125; exec "$@"'
_NAMESPACES = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
_SETPRIV_CAPS = ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
# Still root inside, in the job's own network namespace (loopback only): let the sandbox user
# bind ports below 1024 there, so `rsilab agent` can serve an LLM endpoint's port 443 on it.
# It reaches nothing more; where /proc/sys is read-only the job simply keeps the default.
_LOW_PORTS = '{ echo 0 > /proc/sys/net/ipv4/ip_unprivileged_port_start; } 2>/dev/null; exec "$@"'
_NO_CGROUP_NOTE = "no cgroups: limits hold per process (rlimits), not for the whole tree"
_POLLED_DISK_NOTE = "disk: the workspace's size is polled, not a kernel limit"


class BwrapSandbox(Sandbox):
    """Jobs in bubblewrap; a security boundary (see the module docstring for the mechanism).

    Args:
        runtime: the runtime venv jobs see (default: :func:`current_runtime`).
        uid, gid: the unprivileged identity jobs run as when rsilab is root.
        use_cgroups: None picks cgroups when they can be made; False forces the fallback.
        hidden: host paths hidden from every job (added to each spec's ``hidden``).
    """

    name = "bwrap"
    is_security_boundary = True

    def __init__(
        self,
        runtime: Runtime | None = None,
        *,
        uid: int = NOBODY,
        gid: int = NOBODY,
        use_cgroups: bool | None = None,
        hidden: Sequence[Path] = (),
    ) -> None:
        self.runtime = runtime or current_runtime()
        self.root = os.geteuid() == 0
        self.uid, self.gid = (uid, gid) if self.root else (os.getuid(), os.getgid())
        self.hidden = tuple(Path(p) for p in hidden)
        self._want_cgroups = use_cgroups
        self._lock = threading.Lock()
        self._layout: Layout | None = None
        self._cgroups = _cgroup.CgroupSupport({}, "not prepared")
        self._tools: dict[str, str] = {}
        self._files: Path | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def prepare(self) -> None:
        """Find bwrap, prlimit (and setpriv as root), the runtime and cgroups; run a probe job.

        Idempotent and thread-safe.

        Raises:
            SandboxUnavailable: a tool or the runtime is missing, or the probe job failed.
        """
        with self._lock:
            if self._layout is not None:
                return
            self._tools = self._find_tools()
            if not self.runtime.is_installed():
                raise SandboxUnavailable(
                    f"the runtime environment is not installed at {self.runtime.path}",
                    "run `rsilab runtime install` (make install does it)",
                )
            self._files = Path(tempfile.mkdtemp(prefix=owned_prefix("sandbox")))
            weakref.finalize(self, shutil.rmtree, self._files, True)
            write_files(self._files, self.uid, self.gid)
            if self._want_cgroups is False:
                self._cgroups = _cgroup.CgroupSupport({}, "cgroups turned off by the caller")
            else:
                self._cgroups = _cgroup.probe()
            layout = Layout(self._files, self.runtime.base_prefix(), self.runtime.path)
            self._probe(layout)
            self._layout = layout

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
        with tempfile.TemporaryDirectory(prefix="rsilab-probe-") as tmp:
            spec = RunSpec(
                argv=("python", "-I", "-c", "import os; print(os.getuid())"),
                workspace=Path(tmp),
                limits=Limits(cpu_s=20, wall_s=30, memory_mb=512, processes=16, disk_mb=16),
            )
            result = self._run(spec, layout)
        if not result.ok or result.stdout.strip() != str(self.uid).encode():
            raise SandboxUnavailable(
                "bubblewrap cannot start a job here: "
                + (result.stderr.decode(errors="replace").strip() or f"exit {result.exit_code}"),
                "check that unprivileged user namespaces (or root) are allowed; "
                "RSILAB_SANDBOX=process uses the unsandboxed fallback",
            )

    @property
    def cgroups(self) -> bool:
        """Whether jobs get cgroups (valid after :meth:`prepare`)."""
        return self._cgroups.available

    def close(self) -> None:
        if self._files is not None:
            shutil.rmtree(self._files, ignore_errors=True)
            self._files = None
            self._layout = None

    # -- running -----------------------------------------------------------------------------

    def run(self, spec: RunSpec) -> RunResult:
        self.prepare()
        assert self._layout is not None
        return self._run(spec, self._layout)

    def _run(self, spec: RunSpec, layout: Layout) -> RunResult:
        workspace = validate(spec)
        for path in (layout.runtime, layout.base_prefix):
            if path.is_relative_to(workspace) or workspace.is_relative_to(path):
                raise ValueError(f"workspace {workspace} overlaps the runtime at {path}")
        argv = self._command(spec, workspace, layout)
        cgroup = _cgroup.JobCgroup(self._cgroups) if self._cgroups.available else None
        lent = self._lend(spec, workspace)
        try:
            if cgroup is not None:
                self._create(cgroup, spec.limits)
            tree = None if cgroup is not None else TreeSampler(0)
            seen = self._launch(argv, spec, workspace, cgroup, tree)
        finally:
            if cgroup is not None:
                cgroup.remove()
            self._give_back(lent)
        return self._result(seen, cgroup, tree)

    def _command(self, spec: RunSpec, workspace: Path, layout: Layout) -> list[str]:
        env = job_env(
            spec, path=f"{layout.runtime}/bin:/usr/local/bin:/usr/bin:/bin", home=SANDBOX_HOME
        )
        args = [self._tools["bwrap"], *_NAMESPACES, "--unshare-cgroup-try"]
        args += [] if self.root else ["--unshare-user"]
        args += ["--hostname", "sandbox", "--die-with-parent", "--new-session", "--clearenv"]
        for name, value in sorted(env.items()):
            args += ["--setenv", name, value]
        args += layout.args + layout.job_args(spec, workspace, (*self.hidden, *spec.hidden))
        if self.root:
            args += [*_SETPRIV_CAPS, "--", "/bin/sh", "-c", _LOW_PORTS, "rsilab-ports"]
            args += [self._tools["setpriv"], f"--reuid={self.uid}"]
            args += [f"--regid={self.gid}", "--clear-groups", "--inh-caps=-all"]
            args += ["--bounding-set=-all", "--no-new-privs"]
        args += ["--", *spec.argv]
        per_process = not self._cgroups.available
        nproc = processes_of(self.uid) + spec.limits.processes if per_process else None
        limits = rlimit_args(spec.limits, per_process=per_process, nproc=nproc)
        return ["/bin/sh", "-c", _GATE, "rsilab-gate", self._tools["prlimit"], *limits, *args]

    def _lend(self, spec: RunSpec, workspace: Path) -> list[Path]:
        """As root, make the workspace and writable mounts the sandbox uid's for the run."""
        if not self.root:
            return []
        lent: list[Path] = []
        folders = [workspace] + [Path(m.source).resolve() for m in spec.mounts if m.writable]
        try:
            for folder in folders:
                _ownership.lend(folder, self.uid, self.gid)
                lent.append(folder)
        except OSError as exc:
            self._give_back(lent)
            raise SandboxError(f"cannot lend {folder} to the sandbox user: {exc}") from exc
        return lent

    def _give_back(self, lent: list[Path]) -> None:
        for folder in lent:
            _ownership.restore(folder, self.uid)

    def _create(self, cgroup: _cgroup.JobCgroup, limits: Limits) -> None:
        try:
            cgroup.create(limits.memory_mb, limits.processes)
        except OSError as exc:
            raise SandboxError(f"cannot create the job's cgroups: {exc}") from exc

    def _launch(
        self,
        argv: list[str],
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
            )
        except OSError as exc:
            raise SandboxError(f"cannot start bwrap: {exc}") from exc
        if tree is not None:
            tree.root = proc.pid
        watch = self._watch(proc, spec, workspace, cgroup, tree)
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

    def _watch(
        self,
        proc: subprocess.Popen[bytes],
        spec: RunSpec,
        workspace: Path,
        cgroup: _cgroup.JobCgroup | None,
        tree: TreeSampler | None,
    ) -> Watch:
        disk = DiskWatch(workspace, spec.limits)

        def kill_group() -> None:
            # Killing bwrap kills the job's pid namespace (--die-with-parent on its init).
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)

        if cgroup is None:
            assert tree is not None

            def sample() -> KillReason | None:
                tree.sample()
                return KillReason.DISK if disk.over() else None

            return Watch(check=sample, kill=kill_group)

        def check() -> KillReason | None:
            if cgroup.oom_kills():
                return KillReason.MEMORY
            if cgroup.fork_failures():
                return KillReason.PROCESSES
            if cgroup.cpu_s() > spec.limits.cpu_s:
                return KillReason.CPU_TIME
            return KillReason.DISK if disk.over() else None

        def kill() -> None:
            cgroup.kill_all()
            kill_group()

        return Watch(check=check, kill=kill)

    def _result(
        self, seen: Supervised, cgroup: _cgroup.JobCgroup | None, tree: TreeSampler | None
    ) -> RunResult:
        # bwrap reports a job killed by signal N as exit status 128 + N.
        exit_code, sig = decode_status(seen.returncode)
        if exit_code is not None and 128 < exit_code <= 128 + 64:
            sig, exit_code = exit_code - 128, None
        killed = seen.killed or kill_reason_of_signal(sig)
        notes = list(seen.notes)
        cpu_s, peak = (tree.cpu_s, tree.peak_mb) if tree is not None else (0.0, 0.0)
        if cgroup is not None:
            final = cgroup.final
            cpu_s, peak = final.cpu_s, final.peak_memory_mb
            notes += cgroup.notes
            if killed is None and final.oom_kills:
                killed = KillReason.MEMORY
            elif killed is None and final.fork_failures and exit_code != 0:
                killed = KillReason.PROCESSES
        else:
            notes.append(f"bwrap sandbox: {_NO_CGROUP_NOTE} ({self._cgroups.reason})")
            notes.append("CPU time and peak memory are sampled from /proc: lower bounds")
        return seen.result(
            exit_code=exit_code,
            signal=sig,
            killed=killed,
            cpu_s=cpu_s,
            peak_memory_mb=peak,
            notes=notes,
        )

    def describe(self) -> list[str]:
        cgroups = self._cgroups.available
        who = f"uid {self.uid}" if self.root else f"your uid {self.uid} in a user namespace"
        return [
            "bwrap sandbox: a security boundary",
            f"filesystem: yes - an empty root with /usr, the runtime at {self.runtime.path} and "
            f"the Python it was made from, read-only; the workspace (at {WORKSPACE}) is the only "
            "writable host folder; private size-limited /tmp",
            "network: yes - a new network namespace with loopback only; no DNS",
            f"user: {'yes' if self.root else 'partly'} - jobs run as {who}, no capabilities, "
            "no new privileges; other processes are invisible (own pid namespace)",
            "limits: "
            + (
                "yes - memory, processes, CPU time for the whole tree (cgroups); wall time, "
                "output and workspace size; killed with its parent"
                if cgroups
                else f"partly - {_NO_CGROUP_NOTE}; wall time kills the whole tree"
            ),
            "cgroups: "
            + (
                "yes - one per job, removed after it" if cgroups else f"no ({self._cgroups.reason})"
            ),
        ]
