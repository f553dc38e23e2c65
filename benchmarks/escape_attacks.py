"""The escape suite: what an untrusted job might try from inside a sandbox, and how it is judged.

Shared by ``tests/sandbox/test_escape.py`` (every attack must be contained under
``BwrapSandbox``) and ``benchmarks/bench_sandbox.py`` (the table attack / expected / observed).
Each attack is a small Python script run in the sandbox with the runtime's ``python``, in a
fresh scratch workspace of the sandbox (its own size-limited filesystem under bwrap as root);
it gets the host paths it aims at as a JSON line on stdin (not in its command line, which
every process of the job can read) and prints one JSON line of what it
saw. A judge reads that line, the :class:`RunResult` and the host, and names any breach. An
attack may instead place its workspace somewhere the sandbox must refuse (one holding the
lab): then the refusal, one line, is the contained outcome.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import rsilab
from rsilab.sandbox import (
    BwrapSandbox,
    Confinement,
    Limits,
    RunResult,
    RunSpec,
    Sandbox,
    SandboxError,
    WorkspaceRefused,
)
from rsilab.sandbox._identity import ephemeral_user
from rsilab.store import Lab
from rsilab.store.keys import key_dir

PRELUDE = """
import errno, json, os, sys
T = json.loads(sys.stdin.readline())
def attempt(fn):
    try:
        value = fn()
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        return {"ok": True, "value": str(value)[:300]}
    except BaseException as exc:
        code = getattr(exc, "errno", None)
        name = errno.errorcode.get(code, "") if isinstance(code, int) else ""
        label = type(exc).__name__ + ("/" + name if name else "")
        return {"ok": False, "error": label + ": " + str(exc)[:150]}
def read(path):
    with open(path, "rb") as handle:
        return handle.read(4096)
def report(**found):
    print(json.dumps(found), flush=True)
"""


@dataclass(frozen=True)
class Target:
    """Host-side things the attacks aim at."""

    workspace: Path
    private_split: Path
    secret: str
    lab: Path
    lab_db: Path
    key_dir: Path
    rsilab_source: Path
    digits: Path
    outside: Path
    port: int
    host_pid: int
    connections: list[int] = field(default_factory=list, compare=False)

    def as_json(self) -> str:
        data = {k: str(v) for k, v in asdict(self).items() if k != "connections"}
        return json.dumps(data)


@dataclass(frozen=True)
class Attack:
    """One attack: its script, the limits it runs under, and its judge (None: contained)."""

    name: str
    expected: str
    script: str
    judge: Callable[[RunResult, dict[str, Any], Target], str | None]
    limits: Limits = field(default_factory=lambda: Limits(wall_s=60, cpu_s=60, memory_mb=512))
    setup: Callable[[Target], None] | None = None
    place: Callable[[Sandbox, Target], AbstractContextManager[Path]] | None = None
    """Where the job's workspace is; default: a scratch workspace of ``limits.disk_mb`` MiB."""


@dataclass(frozen=True)
class Outcome:
    attack: str
    expected: str
    observed: str
    contained: bool


def _attempts(found: dict[str, Any]) -> list[dict[str, Any]]:
    return [v for v in found.values() if isinstance(v, dict) and "ok" in v]


def _errors(found: dict[str, Any]) -> str:
    """A short summary of what each attempt ran into."""
    parts = [a.get("error", "").split(":")[0] or "succeeded" for a in _attempts(found)]
    return ", ".join(sorted(set(parts))) or "no report"


def _none_succeeded(result: RunResult, found: dict[str, Any], target: Target) -> str | None:
    if not found:
        return f"the script did not report (exit {result.exit_code}): {result.stderr[-200:]!r}"
    wins = [k for k, v in found.items() if isinstance(v, dict) and v.get("ok")]
    return f"succeeded: {', '.join(wins)}" if wins else None


def _no_secret(result: RunResult, found: dict[str, Any], target: Target) -> str | None:
    return "the secret was read" if target.secret.encode() in result.stdout else None


def _no_write(result: RunResult, found: dict[str, Any], target: Target) -> str | None:
    if target.outside.exists():
        return f"{target.outside} was created on the host"
    return _none_succeeded(result, found, target)


def _no_connection(result: RunResult, found: dict[str, Any], target: Target) -> str | None:
    if target.connections:
        return "the host server accepted a connection"
    return _none_succeeded(result, found, target)


def _killed_for(*reasons: str) -> Callable[[RunResult, dict[str, Any], Target], str | None]:
    def judge(result: RunResult, found: dict[str, Any], target: Target) -> str | None:
        if result.killed is None or result.killed.value not in reasons:
            return f"not killed for {'/'.join(reasons)} (killed={result.killed})"
        return None

    return judge


def _disk_contained(result: RunResult, found: dict[str, Any], target: Target) -> str | None:
    used = sum(p.stat().st_size for p in target.workspace.rglob("*") if p.is_file())
    if used > 256 * 1024 * 1024:
        return f"the workspace grew to {used >> 20} MB"
    if result.killed is None and not found.get("stopped_by"):
        return "neither killed nor stopped by a write error"
    return None


def _proc_private(result: RunResult, found: dict[str, Any], target: Target) -> str | None:
    cmdline = Path(f"/proc/{target.host_pid}/cmdline").read_bytes().decode("utf-8", "replace")
    if target.secret.encode() in result.stdout:
        return "a host process's environment was read"
    if json.dumps(cmdline)[1:61] in json.dumps(found):
        return "the host test process's command line was read"
    return None


def _not_root(result: RunResult, found: dict[str, Any], target: Target) -> str | None:
    ids = found.get("ids", [0])
    if 0 in ids:
        return f"uid/gid 0 inside the sandbox: {ids}"
    if found.get("cap_eff", "0" * 16).strip("0"):
        return f"capabilities held: {found['cap_eff']}"
    return _none_succeeded(result, {k: v for k, v in found.items() if k == "setuid"}, target)


def _fallocate_contained(result: RunResult, found: dict[str, Any], target: Target) -> str | None:
    """At most the limit (and a little metadata) allocated in the workspace, and at least
    one allocation refused (or the job killed) on the way to 4 GiB."""
    blocks = sum(p.lstat().st_blocks for p in target.workspace.rglob("*")) * 512
    if blocks > (ATTACK_DISK_MB + 16) << 20:
        return f"the workspace holds {blocks >> 20} MiB allocated on the host"
    refused = [r for r in found.get("calls", []) if r != "ok"]
    if result.killed is None and not refused:
        return "every fallocate succeeded and the job was not stopped"
    return None


def _no_new_userns(result: RunResult, found: dict[str, Any], target: Target) -> str | None:
    if "uid=0" in str(found.get("unshare_cli", {}).get("value", "")):
        return "`unshare -Ur` gave uid 0"
    return _none_succeeded(result, {k: v for k, v in found.items() if k != "threads"}, target)


def _no_host_paths(result: RunResult, found: dict[str, Any], target: Target) -> str | None:
    if not found:
        return _none_succeeded(result, found, target)
    seen = json.dumps(found)
    named = {
        "the lab": target.lab,
        "the workspace root": target.workspace,
        "the key folder": target.key_dir,
        "a private split": target.private_split.parent,
        "a task source": target.digits,
    }
    leaks = [f"{what} ({path})" for what, path in named.items() if str(path) in seen]
    return f"host paths in /proc: {', '.join(leaks)}" if leaks else None


def _refused(result: RunResult, found: dict[str, Any], target: Target) -> str | None:
    return "a job ran in a workspace holding the lab" if result.exit_code is not None else None


@contextlib.contextmanager
def _holding_the_lab(sandbox: Sandbox, target: Target) -> Iterator[Path]:
    """The folder above the lab, as ``rsilab agent --workspace .`` with ``./.rsilab`` makes."""
    folder = sandbox.workspace(target.lab.parent)
    try:
        yield folder
    finally:
        sandbox.release_workspace(folder)


def _plant_links(target: Target) -> None:
    (target.workspace / "split_link").symlink_to(target.private_split)
    (target.workspace / "root_link").symlink_to("/")
    (target.workspace / "lab_link").symlink_to(target.lab_db)


ATTACK_DISK_MB = 256
"""The workspace size of the disk attacks: far below the 4 GiB they try to take."""

ATTACKS: list[Attack] = [
    Attack(
        "read a private split outside the workspace",
        "denied",
        "report(read=attempt(lambda: read(T['private_split'])))",
        lambda r, f, t: _no_secret(r, f, t) or _none_succeeded(r, f, t),
    ),
    Attack(
        "read the lab database",
        "denied",
        "report(read=attempt(lambda: read(T['lab_db'])),"
        " listing=attempt(lambda: os.listdir(os.path.dirname(T['lab_db']))))",
        _none_succeeded,
    ),
    Attack(
        "read rsilab's source",
        "denied",
        "report(read=attempt(lambda: read(T['rsilab_source'])))",
        _none_succeeded,
    ),
    Attack(
        "import rsilab",
        "ModuleNotFoundError",
        "report(imported=attempt(lambda: __import__('rsilab').__file__))",
        _none_succeeded,
    ),
    Attack(
        "rebuild digits from scikit-learn's data file",
        "file and package invisible",
        "hits = []\n"
        "for root, dirs, files in os.walk('/'):\n"
        "    if root in ('/proc', '/sys', '/dev'):\n"
        "        dirs[:] = []\n"
        "    hits += [os.path.join(root, n) for n in files if n.startswith('digits.csv')]\n"
        "report(read=attempt(lambda: read(T['digits'])),"
        " sklearn=attempt(lambda: __import__('sklearn').__file__),"
        " search=attempt(lambda: hits[0]))",
        _none_succeeded,
    ),
    Attack(
        "write outside the workspace",
        "denied, nothing on the host",
        "def write(path):\n"
        "    with open(path, 'w') as handle:\n"
        "        handle.write('pwned')\n"
        "    os.remove(path)  # a breach is reported, and the host is not left littered\n"
        "report(host=attempt(lambda: write(T['outside'])),"
        " usr=attempt(lambda: write('/usr/pwned')), etc=attempt(lambda: write('/etc/pwned')),"
        " root=attempt(lambda: write('/pwned')),"
        " runtime=attempt(lambda: write(sys.prefix + '/pwned')),"
        " stdlib=attempt(lambda: write(os.__file__ + '.pwned')))",
        _no_write,
    ),
    Attack(
        "connect to a service on the host's 127.0.0.1",
        "connection refused",
        "import socket\n"
        "report(tcp=attempt(lambda: socket.create_connection(('127.0.0.1', int(T['port'])), 3)))",
        _no_connection,
    ),
    Attack(
        "resolve a host name",
        "name resolution fails",
        "import socket\n"
        "report(pypi=attempt(lambda: socket.getaddrinfo('pypi.org', 443)),"
        " example=attempt(lambda: socket.getaddrinfo('example.com', 80)))",
        _none_succeeded,
    ),
    Attack(
        "fork bomb",
        "killed (processes), host fine",
        "import time\n"
        "while True:\n"
        "    try:\n"
        "        os.fork()\n"
        "    except OSError:\n"
        "        time.sleep(0.01)\n",
        _killed_for("processes", "wall_time"),
        Limits(processes=32, wall_s=20, cpu_s=60, memory_mb=512),
    ),
    Attack(
        "memory bomb",
        "killed (memory)",
        "blocks = []\nwhile True:\n    blocks.append(b'x' * (32 << 20))\n",
        _killed_for("memory"),
        Limits(memory_mb=256, wall_s=20, cpu_s=60),
    ),
    Attack(
        "fill the disk",
        "killed (disk) or writes fail, host fine",
        "stopped_by = None\n"
        "try:\n"
        "    for i in range(10000):\n"
        "        with open('fill-%d' % i, 'wb') as handle:\n"
        "            handle.write(b'x' * (4 << 20))\n"
        "except OSError as exc:\n"
        "    stopped_by = type(exc).__name__\n"
        "report(stopped_by=stopped_by)",
        _disk_contained,
        Limits(disk_mb=32, file_mb=8, wall_s=30, cpu_s=60, memory_mb=512),
    ),
    Attack(
        "follow a symlink planted in the workspace",
        "link leads nowhere outside",
        "report(split=attempt(lambda: read('split_link')),"
        " lab=attempt(lambda: read('lab_link')),"
        " via_root=attempt(lambda: read('root_link' + T['private_split'])))",
        lambda r, f, t: _no_secret(r, f, t) or _none_succeeded(r, f, t),
        setup=_plant_links,
    ),
    Attack(
        "read another process's environment or command line",
        "host processes invisible",
        "pid = T['host_pid']\n"
        "report(init_env=attempt(lambda: read('/proc/1/environ')),"
        " host_env=attempt(lambda: read('/proc/%s/environ' % pid)),"
        " host_cmdline=attempt(lambda: read('/proc/%s/cmdline' % pid)),"
        " pids=sorted(p for p in os.listdir('/proc') if p.isdigit()))",
        _proc_private,
    ),
    Attack(
        "signal a host process",
        "no such process",
        "import signal\n"
        "report(kill=attempt(lambda: os.kill(int(T['host_pid']), 0)),"
        " init=attempt(lambda: os.kill(1, signal.SIGKILL)))",
        _none_succeeded,
    ),
    Attack(
        "run as root",
        "unprivileged uid, setuid fails",
        "status = open('/proc/self/status').read()\n"
        "cap = [l.split()[1] for l in status.splitlines() if l.startswith('CapEff')][0]\n"
        "report(ids=[os.getuid(), os.geteuid(), os.getgid(), os.getegid()], cap_eff=cap,"
        " setuid=attempt(lambda: os.setuid(0)))",
        _not_root,
    ),
    Attack(
        "leave the job's cgroup",
        "no cgroup files visible",
        "def join(path):\n"
        "    with open(path, 'w') as handle:\n"
        "        handle.write(str(os.getpid()))\n"
        "report(pids=attempt(lambda: join('/sys/fs/cgroup/pids/cgroup.procs')),"
        " memory=attempt(lambda: join('/sys/fs/cgroup/memory/cgroup.procs')))",
        _none_succeeded,
    ),
    Attack(
        "fallocate past the disk limit",
        "ENOSPC inside, nothing on the host",
        "calls = []\n"
        "for i in range(8):\n"
        "    fd = os.open('blob-%d' % i, os.O_CREAT | os.O_WRONLY)\n"
        "    try:\n"
        "        os.posix_fallocate(fd, 0, 500 << 20)\n"
        "        calls.append('ok')\n"
        "    except OSError as exc:\n"
        "        calls.append(errno.errorcode.get(exc.errno, str(exc.errno)))\n"
        "    os.close(fd)\n"
        "report(calls=calls)",
        _fallocate_contained,
        Limits(disk_mb=ATTACK_DISK_MB, file_mb=512, wall_s=30, cpu_s=60, memory_mb=512),
    ),
    Attack(
        "make a user namespace (unshare -Ur)",
        "EPERM; clone3 ENOSYS",
        "import ctypes, subprocess, threading\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "NEWUSER, SIGCHLD = 0x10000000, 17\n"
        "def syscall(*args):\n"
        "    ret = libc.syscall(*[ctypes.c_long(a) for a in args])\n"
        "    if ret == 0 and args[0] == 56:\n"
        "        os._exit(0)  # a child made by clone: never run the rest twice\n"
        "    if ret < 0:\n"
        "        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))\n"
        "    return ret\n"
        "def cli():\n"
        "    done = subprocess.run(['unshare', '-Ur', 'id'], capture_output=True, text=True)\n"
        "    if done.returncode:\n"
        "        raise OSError(errno.EPERM, done.stderr.strip())\n"
        "    return done.stdout\n"
        "seen = []\n"
        "worker = threading.Thread(target=lambda: seen.append(1))\n"
        "worker.start(); worker.join()\n"
        "report(unshare_cli=attempt(cli),"
        " unshare=attempt(lambda: syscall(272, NEWUSER)),"
        " clone=attempt(lambda: syscall(56, NEWUSER | SIGCHLD, 0, 0, 0, 0)),"
        " clone3=attempt(lambda: syscall(435, 0, 0)),"
        " threads=seen)",
        _no_new_userns,
    ),
    Attack(
        "find host paths in /proc",
        "no lab, workspace or task path",
        "found = {}\n"
        "for pid in [p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]:\n"
        "    for name in ('cmdline', 'environ'):\n"
        "        try:\n"
        "            found['%s/%s' % (pid, name)] = read('/proc/%s/%s' % (pid, name))"
        ".decode('utf-8', 'replace')\n"
        "        except OSError:\n"
        "            pass\n"
        "for name in ('mountinfo', 'mounts'):\n"
        "    found['self/' + name] = open('/proc/self/' + name).read()\n"
        "found['self/environ'] = read('/proc/self/environ').decode('utf-8', 'replace')\n"
        "found['cwd'] = os.getcwd()\n"
        "report(**found)",
        _no_host_paths,
    ),
    Attack(
        "work in a folder that holds the lab",
        "refused before any job runs",
        "report(read=attempt(lambda: read('.rsilab/lab.db')))",
        _refused,
        place=_holding_the_lab,
    ),
]


class _Server:
    """A TCP server on 127.0.0.1 that records every connection it accepts."""

    def __init__(self, target_connections: list[int]) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = int(self.sock.getsockname()[1])
        self.accepted = target_connections
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            with contextlib.suppress(OSError):
                conn, _ = self.sock.accept()
                self.accepted.append(1)
                conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


def digits_file() -> Path:
    """scikit-learn's digits data file in the environment rsilab runs from."""
    import sklearn

    return Path(sklearn.__file__).parent / "datasets" / "data" / "digits.csv.gz"


@contextlib.contextmanager
def targets(root: Path) -> Iterator[Target]:
    """Build what the attacks aim at under ``root``: a private split, a real lab, a server."""
    secret = "private-split-" + secrets.token_hex(8)
    private = root / "private" / "test.jsonl"
    private.parent.mkdir(parents=True)
    private.write_text(json.dumps({"x": secret}) + "\n")
    with Lab.init(root / "project" / ".rsilab"):
        pass
    connections: list[int] = []
    server = _Server(connections)
    previous = os.environ.get("RSILAB_ESCAPE_MARKER")
    os.environ["RSILAB_ESCAPE_MARKER"] = secret  # what reading our environ would reveal
    try:
        yield Target(
            workspace=root / "workspace",
            private_split=private,
            secret=secret,
            lab=root / "project" / ".rsilab",
            lab_db=root / "project" / ".rsilab" / "lab.db",
            key_dir=key_dir().resolve(),
            rsilab_source=Path(rsilab.__file__),
            digits=digits_file(),
            outside=root / "outside-pwned.txt",
            port=server.port,
            host_pid=os.getpid(),
            connections=connections,
        )
    finally:
        server.close()
        if previous is None:
            os.environ.pop("RSILAB_ESCAPE_MARKER", None)
        else:
            os.environ["RSILAB_ESCAPE_MARKER"] = previous


def _parse(stdout: bytes) -> dict[str, Any]:
    for line in reversed(stdout.decode("utf-8", "replace").splitlines()):
        with contextlib.suppress(ValueError):
            data = json.loads(line)
            if isinstance(data, dict):
                return data
    return {}


def run_attack(sandbox: Sandbox, attack: Attack, target: Target) -> Outcome:
    """Run one attack in a fresh workspace and judge it. A workspace the sandbox refuses
    is judged as a job that never ran (exit code None)."""
    place = attack.place or (lambda box, _: box.scratch(attack.limits.disk_mb, kind="escape"))
    try:
        with place(sandbox, target) as workspace:
            target = _with_workspace(target, workspace)
            if attack.setup is not None:
                attack.setup(target)
            spec = RunSpec(
                argv=("python", "-c", PRELUDE + attack.script),
                workspace=target.workspace,
                limits=attack.limits,
                stdin=target.as_json().encode() + b"\n",
            )
            result = sandbox.run(spec)
            found = _parse(result.stdout)
            breach = attack.judge(result, found, target)
    except (WorkspaceRefused, SandboxError) as exc:
        refused = _NOT_RUN if attack.place is not None else None
        if refused is None:
            raise
        breach = attack.judge(refused, {}, target)
        return Outcome(attack.name, attack.expected, breach or f"refused: {exc}", breach is None)
    observed = breach or _observed(result, found)
    return Outcome(attack.name, attack.expected, observed, breach is None)


_NOT_RUN = RunResult(None, None, None, b"", b"", False, False, 0.0, 0.0, 0.0)


def _with_workspace(target: Target, workspace: Path) -> Target:
    fields = {k: getattr(target, k) for k in target.__dataclass_fields__}
    fields["workspace"] = workspace
    return Target(**fields)


def _observed(result: RunResult, found: dict[str, Any]) -> str:
    if result.killed is not None:
        return f"killed ({result.killed.value}) after {result.wall_s:.1f} s"
    if "stopped_by" in found:
        return f"writes failed: {found['stopped_by']}"
    if "calls" in found:
        calls = found["calls"]
        return f"{calls.count('ok')} of 8 x 500 MiB allocated, then {calls[-1]}"
    if "self/mountinfo" in found:
        return f"{len(found)} /proc entries read, none naming a host path"
    return _errors(found)


def confinement_for(target: Target) -> Confinement:
    """A sandbox's confinement to the targets' lab: a fresh uid, the lab and key folder
    private (as ``LabServices`` binds a lab's sandbox)."""
    return Confinement(ephemeral_user(), private=(target.lab, target.key_dir))


def run_all(root: Path) -> list[Outcome]:
    """Every attack in :data:`ATTACKS` against a BwrapSandbox bound to the targets' lab.

    Raises:
        SandboxUnavailable: bubblewrap cannot be used here.
    """
    with targets(root) as target, BwrapSandbox(confinement=confinement_for(target)) as box:
        return [run_attack(box, attack, target) for attack in ATTACKS]


if __name__ == "__main__":  # a quick look: python -m benchmarks.escape_attacks
    with tempfile.TemporaryDirectory() as tmp:
        for outcome in run_all(Path(tmp)):
            print(outcome, file=sys.stdout)
