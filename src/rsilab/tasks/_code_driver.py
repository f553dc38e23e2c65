"""The ``python_tests`` driver: runs inside ONE sandbox job and judges many programs there.

This file is never imported by rsilab: :mod:`rsilab.tasks._code_scorer` copies it into the
job's read-only workspace and runs it with the sandbox runtime's Python (standard library
only). It reads one JSON request on stdin::

    {"limits": {"cpu_s": 1.0, "wall_s": 3.0, "memory_mb": 256, "file_kb": 1024},
     "programs": [{"program": "def f(x): ...", "entry": "f", "tests": ["assert f(1) == 2"]}]}

and writes ``{"ready": true}`` once it is set up, then one JSON line per program, in order, as
each ends: ``{"i": N, "passed": bool,
"note": str}``. A line ``{"error": str}`` (then exit 3) means it cannot judge safely here; the
scorer then fails closed.

Each program runs in a forked child of its own, which before running any program text:
starts its own session; points stdin, stdout and stderr at /dev/null (what it prints is never
read); moves into a fresh temporary folder; sets rlimits (CPU seconds, address space, file
size, open files, no core dumps, and *no* new processes or threads: ``RLIMIT_NPROC`` 0); and
installs a seccomp filter that denies signalling or tracing any process, reading or writing
another's memory, and opening sockets (``EPERM``). The driver itself is not dumpable, so a
child cannot open its /proc memory or file descriptors either. The child runs the program,
checks the entry function is defined, runs each test line, and writes its verdict, tagged with
a nonce, to a pipe only the driver reads. The driver enforces the wall-time limit, kills the
child's session, and removes its folder and anything new in /tmp and /dev/shm, so nothing a
program leaves is seen by the next.

What this does not stop: a program run in the same process as its tests can subvert them
(an object equal to everything, inspecting the caller's frame, finding the nonce in memory).
The sandbox bounds what such a program can reach, not whether its verdict is honest.
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import json
import math
import os
import platform
import resource
import secrets
import select
import shutil
import signal
import struct
import sys
import tempfile
import time
from typing import Any

SCRATCH = ("/tmp", "/dev/shm")
"""Writable places of the job, cleaned of what a program left after each program."""
VERDICT_BYTES = 64 * 1024
NOTE_CHARS = 200

# Classic BPF for seccomp (see rsilab.sandbox._seccomp, which bubblewrap installs for the job).
_LD_ABS_W, _JEQ, _RET = 0x20, 0x15, 0x06
_ALLOW, _KILL_PROCESS, _ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_EPERM = 1
_DENIED = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "ptrace",
           "process_vm_readv", "process_vm_writev", "pidfd_open", "pidfd_send_signal",
           "pidfd_getfd", "socket")  # fmt: skip
_ARCHES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (0xC000003E, dict(zip(_DENIED, (62, 200, 234, 129, 297, 101, 310, 311, 434,
                                              424, 438, 41), strict=True))),
    "aarch64": (0xC00000B7, dict(zip(_DENIED, (129, 130, 131, 138, 240, 117, 270, 271, 434,
                                               424, 438, 198), strict=True))),
}  # fmt: skip
_PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 4, 38, 22, 2


class SetupError(Exception):
    """The driver cannot confine programs here (unknown architecture, seccomp refused)."""


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def child_filter() -> bytes:
    """The seccomp program children install: deny :data:`_DENIED`, kill foreign-arch calls."""
    arch = _ARCHES.get(platform.machine())
    if arch is None or sys.byteorder != "little":
        raise SetupError(f"no seccomp filter for {platform.machine()} ({sys.byteorder}-endian)")
    audit, numbers = arch
    ops = [_op(_LD_ABS_W, 4), _op(_JEQ, audit, jt=1), _op(_RET, _KILL_PROCESS), _op(_LD_ABS_W, 0)]
    for number in sorted(numbers.values()):
        ops += [_op(_JEQ, number, jf=1), _op(_RET, _ERRNO | _EPERM)]
    return b"".join([*ops, _op(_RET, _ALLOW)])


def _prctl(option: int, *args: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    # prctl's arguments are unsigned longs: a pointer passed as a C int would be cut to 32 bits
    libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
    if libc.prctl(option, *args, *[0] * (4 - len(args))) != 0:
        raise SetupError(f"prctl({option}) failed: {os.strerror(ctypes.get_errno())}")


def _install(program: bytes) -> None:
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    _prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog))


def _confine(folder: str, limits: dict[str, Any], program: bytes) -> None:
    """Everything the child does before running program text (see the module docstring)."""
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.chdir(folder)
    os.environ.update(HOME=folder, TMPDIR=folder)
    tempfile.tempdir = folder
    cpu = math.ceil(float(limits["cpu_s"]))
    memory = int(limits["memory_mb"]) << 20
    for which, value in (
        (resource.RLIMIT_CPU, (cpu, cpu + 1)),
        (resource.RLIMIT_AS, (memory, memory)),
        (resource.RLIMIT_FSIZE, (int(limits["file_kb"]) << 10,) * 2),
        (resource.RLIMIT_NOFILE, (64, 64)),
        (resource.RLIMIT_CORE, (0, 0)),
        (resource.RLIMIT_NPROC, (0, 0)),
    ):
        resource.setrlimit(which, value)
    _install(program)


def judge(program: str, entry: str, tests: list[str]) -> tuple[bool, str]:
    """Run ``program``, check it defines ``entry``, run each test line: (passed, why not)."""
    space: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    try:
        exec(compile(program, "<program>", "exec"), space)
    except BaseException as exc:  # the program's failure, whatever it raised
        return False, f"the program raised {type(exc).__name__}"
    if not callable(space.get(entry)):
        return False, f"the program does not define {entry}()"
    for number, test in enumerate(tests, 1):
        try:
            exec(compile(test, f"<test {number}>", "exec"), space)
        except BaseException as exc:
            return False, f"test {number} failed: {type(exc).__name__}"
    return True, ""


def _child(job: dict[str, Any], limits: dict[str, Any], nonce: str, pipe: int,
           folder: str, program: bytes) -> None:  # fmt: skip
    try:
        _confine(folder, limits, program)
    except BaseException as exc:
        _send(pipe, {"nonce": nonce, "setup": f"{type(exc).__name__}: {exc}"})
        os._exit(0)
    passed, note = judge(str(job["program"]), str(job["entry"]), list(job["tests"]))
    _send(pipe, {"nonce": nonce, "passed": passed, "note": note})
    os._exit(0)


def _send(pipe: int, verdict: dict[str, Any]) -> None:
    try:
        os.write(pipe, json.dumps(verdict).encode()[:VERDICT_BYTES])
    except BaseException:
        os._exit(1)


def _read(pipe: int, wall_s: float) -> tuple[bytes, bool]:
    """What the child wrote until it closed the pipe, and whether the wall time ran out."""
    deadline, data = time.monotonic() + wall_s, b""
    while len(data) <= VERDICT_BYTES:
        left = deadline - time.monotonic()
        if left <= 0:
            return data, True
        ready, _, _ = select.select([pipe], [], [], left)
        if ready:
            chunk = os.read(pipe, 65536)
            if not chunk:
                return data, False
            data += chunk
    return data, False


def _kill(pid: int) -> int:
    """SIGKILL the child's session and the child; its wait status."""
    for kill, target in ((os.killpg, pid), (os.kill, pid)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(target, signal.SIGKILL)
    return os.waitpid(pid, 0)[1]


def _remove(path: str) -> None:
    if os.path.islink(path) or not os.path.isdir(path):
        os.unlink(path)
        return
    # a program may have locked its folders (mode 000); they are ours to unlock (same uid)
    os.chmod(path, 0o700)
    for folder, names, _ in os.walk(path):
        for name in names:
            if not os.path.islink(inner := os.path.join(folder, name)):
                os.chmod(inner, 0o700)
    shutil.rmtree(path, ignore_errors=True)


def _clean(before: dict[str, set[str]]) -> None:
    for place, kept in before.items():
        for name in set(os.listdir(place)) - kept:
            with contextlib.suppress(OSError):
                _remove(os.path.join(place, name))


def _verdict(data: bytes, nonce: str, status: int, timed_out: bool) -> tuple[bool, str]:
    try:
        said = json.loads(data.decode())
    except ValueError:
        said = None
    if isinstance(said, dict) and said.get("nonce") == nonce:
        if "setup" in said:
            raise SetupError(f"cannot confine a program: {said['setup']}")
        exited = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        passed = said.get("passed") is True and exited
        return passed, str(said.get("note", ""))[:NOTE_CHARS]
    if timed_out:
        return False, "wall-time limit"
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL):
        return False, "CPU-time limit"
    if os.WIFSIGNALED(status):
        return False, f"killed by signal {os.WTERMSIG(status)}"
    return False, "ended without a verdict"


def run_one(job: dict[str, Any], limits: dict[str, Any], program: bytes) -> tuple[bool, str]:
    """Judge one program in a confined child; (passed, note). Raises SetupError."""
    before = {place: set(os.listdir(place)) for place in SCRATCH if os.path.isdir(place)}
    folder = tempfile.mkdtemp(prefix="program-", dir="/tmp")
    nonce = secrets.token_hex(16)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _child(job, limits, nonce, write_end, folder, program)
    os.close(write_end)
    try:
        data, timed_out = _read(read_end, float(limits["wall_s"]))
    finally:
        os.close(read_end)
        status = _kill(pid)
        _clean(before)
    return _verdict(data, nonce, status, timed_out)


def main() -> int:
    request = json.loads(sys.stdin.buffer.read())
    try:
        _prctl(_PR_SET_DUMPABLE, 0)
        program = child_filter()
        print(json.dumps({"ready": True}), flush=True)
        for number, job in enumerate(request["programs"]):
            passed, note = run_one(job, request["limits"], program)
            print(json.dumps({"i": number, "passed": passed, "note": note}), flush=True)
    except SetupError as exc:
        print(json.dumps({"error": str(exc)}), flush=True)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
