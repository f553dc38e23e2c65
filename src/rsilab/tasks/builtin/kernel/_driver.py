"""The kernel task's timing driver: a standalone program (stdlib + numpy) run as
``python -I -c SOURCE --seed N`` in the candidate's workspace; never imported by rsilab.

Protocol: stdin carries ``{"id", "input": {"n": int, "seed": int}}`` lines; stdout gets one
``{"id", "output": {"valid", "t_reference", "t_candidate", "note"}}`` line per input.

Three processes, so the candidate's code never shares an address space with the clock or the
reference: this parent (the clock and the judge), a *reference worker* and a *candidate worker*
(which alone imports ``kernel.py`` from the workspace). The parent and the reference worker make
themselves non-dumpable first, so a process of the same user cannot ptrace them or read their
memory or file descriptors through /proc. Inputs are written into a worker's private memfd
*after* the clock starts, so nothing can be computed ahead; every repeat draws a fresh input
from (sample seed, run seed, repeat), and the run seed (``--seed``) is chosen by the controller.
Each repeat times the reference and the candidate back to back, alternating which goes first;
the sample's times are the medians. A wrong, crashed, hung or ill-shaped output makes the
sample invalid.

The candidate runs as the same user as the parent and the reference, so it can signal,
renice or starve them; no unprivileged job can put it in a namespace or uid of its own. So
nothing the candidate can do to the others may lower its time or raise the reference's:

- the reference's time is its own thread's CPU time (``t_reference``), which a stopped,
  starved or reniced process does not accrue; the candidate's is the parent's wall clock from
  writing its input to its answer (``t_candidate``), which interference can only lengthen;
- while the reference is timed, every process of the candidate is stopped (SIGSTOP, checked
  in /proc for each thread). The parent is a child subreaper, so a process the candidate forks
  and orphans stays below the parent and is found; the candidate's output is copied at its
  answer, so work it finishes afterwards does not count;
- the parent and the reference never stop legitimately: a SIGCONT seen by either, or a
  reference found stopped, marks that sample and every later one invalid. A killed reference
  or parent makes the samples invalid too. Interference counts against the candidate, never
  for it.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import mmap
import os
import select
import signal
import statistics
import subprocess
import sys
import time
from typing import Any

import numpy as np

REPEATS = 5
CALL_TIMEOUT_S = 20.0
PAUSE_TIMEOUT_S = 5.0
MAX_N = 1 << 16
WINDOW = 16
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
WATCH_S = 0.05
"""How often the parent looks whether a reference it waits for was stopped."""
_FOUND_STOPPED = "the reference worker was stopped by another process (found stopped)"
_STOPPED = frozenset("TtZXx")
"""/proc states of a task that cannot run: stopped, traced-stopped, zombie, dead."""


def reference(x: np.ndarray) -> np.ndarray:
    """Trailing moving average over ``WINDOW`` values (fewer at the start); the spec."""
    out = np.empty(len(x))
    for i in range(len(x)):
        lo = max(0, i - WINDOW + 1)
        total = 0.0
        for j in range(lo, i + 1):
            total += x[j]
        out[i] = total / (i + 1 - lo)
    return out


def _prctl(option: int, value: int) -> bool:
    try:
        return bool(ctypes.CDLL(None).prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


_continued = [0]
"""SIGCONTs this process received: none is ever sent to the parent or the reference."""


def _count_continue(signum: int, frame: object) -> None:
    _continued[0] += 1


def _views(buf: mmap.mmap) -> tuple[np.ndarray, np.ndarray]:
    both = np.frombuffer(buf, dtype=np.float64)
    return both[:MAX_N], both[MAX_N:]


def _worker(role: str, fd: int, cmd_fd: int, reply_fd: int) -> None:
    """Answer each command ``n`` with ``ok CPU_NS CONTINUED`` (the call's thread CPU time
    and the SIGCONTs seen so far) or ``error ...``; only the reference's numbers are read."""
    if role == "reference":
        _prctl(_PR_SET_DUMPABLE, 0)
        signal.signal(signal.SIGCONT, _count_continue)
        fn = reference
    else:
        sys.path.insert(0, os.getcwd())
        import kernel  # type: ignore[import-not-found]  # the candidate, from the workspace

        fn = kernel.kernel
    buf = mmap.mmap(fd, 16 * MAX_N)
    x_all, y_all = _views(buf)
    with os.fdopen(cmd_fd, "rb", buffering=0) as cmd, os.fdopen(reply_fd, "wb", 0) as reply:
        reply.write(b"ok 0 0\n")
        while line := cmd.readline():
            n = int(line)
            try:
                start = time.thread_time_ns()
                y = np.asarray(fn(x_all[:n]), dtype=np.float64)
                if y.shape != (n,):
                    raise ValueError(f"output shape {y.shape}, expected ({n},)")
                y_all[:n] = y
                spent = time.thread_time_ns() - start
                reply.write(f"ok {spent} {_continued[0]}\n".encode())
            except Exception as exc:
                message = f"error {type(exc).__name__}: {exc}".replace("\n", " ")[:300]
                reply.write(message.encode() + b"\n")


def _stat(path: str) -> tuple[int, str] | None:
    """(parent pid, state) from a /proc stat file; None when the task is gone."""
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode(errors="replace")
        fields = text[text.rindex(")") + 2 :].split()
        return int(fields[1]), fields[0]
    except (OSError, ValueError, IndexError):
        return None


def _below(root: int, skip: int) -> list[int]:
    """Every process below ``root`` (by parent pid), leaving out ``skip`` and its subtree."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            found = _stat(f"/proc/{name}/stat")
            if found is not None:
                children.setdefault(found[0], []).append(int(name))
    result: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child != skip:
                result.append(child)
                todo.append(child)
    return result


def _cannot_run(pid: int) -> bool:
    """True when every thread of ``pid`` is stopped (or the process is gone)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    for tid in tids:
        found = _stat(f"/proc/{pid}/task/{tid}/stat")
        if found is not None and found[1] not in _STOPPED:
            return False
    return True


class Candidate:
    """The candidate's processes: everything below this parent but the reference worker."""

    def __init__(self, reference_pid: int, worker_pid: int) -> None:
        self.reference_pid = reference_pid
        self.worker_pid = worker_pid

    def processes(self) -> list[int]:
        return _below(os.getpid(), self.reference_pid)

    def _signal(self, pids: list[int], signum: int) -> None:
        for pid in pids:
            with contextlib.suppress(OSError):  # gone since the scan
                os.kill(pid, signum)

    def pause(self) -> str:
        """Stop every candidate process and wait until none can run; '' when done, else
        why not. A stopped process cannot fork, so the scan reaches a fixed point."""
        deadline = time.monotonic() + PAUSE_TIMEOUT_S
        while True:
            pids = self.processes()
            self._signal(pids, signal.SIGSTOP)
            if all(_cannot_run(pid) for pid in pids) and set(self.processes()) <= set(pids):
                return ""
            if time.monotonic() > deadline:
                return f"its processes could not all be paused within {PAUSE_TIMEOUT_S:g} s"
            time.sleep(0.0002)

    def resume(self) -> None:
        pids = self.processes()
        self._signal(pids, signal.SIGCONT)
        for pid in pids:  # orphans the candidate left are ours to reap (the worker is Popen's)
            if pid != self.worker_pid:
                with contextlib.suppress(ChildProcessError):  # not ours: its parent reaps it
                    os.waitpid(pid, os.WNOHANG)

    def kill(self) -> None:
        """SIGKILL every candidate process (what it left running must not outlive us)."""
        self._signal(self.processes(), signal.SIGKILL)


class Worker:
    """One worker process and its private shared buffer."""

    def __init__(self, role: str, source: str) -> None:
        self.fd = os.memfd_create(f"rsilab-{role}")
        os.ftruncate(self.fd, 16 * MAX_N)
        self.x, self.y = _views(mmap.mmap(self.fd, 16 * MAX_N))
        cmd_r, self.cmd = os.pipe()
        self.reply, reply_w = os.pipe()
        argv = [sys.executable, "-I", "-c", source, "--worker", role, str(self.fd)]
        argv += [str(cmd_r), str(reply_w)]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=sys.stderr, pass_fds=(self.fd, cmd_r, reply_w)
        )
        os.close(cmd_r)
        os.close(reply_w)
        self.dead = ""
        self.watched = role == "reference"
        self.cpu_s = 0.0
        self.continued = 0
        self._wait_reply()

    def _wait_reply(self) -> str:
        if self.dead:
            return self.dead
        deadline = time.monotonic() + CALL_TIMEOUT_S
        ready = False
        while not ready and not self.dead:
            left = deadline - time.monotonic()
            ready = left > 0 and bool(select.select([self.reply], [], [], min(left, WATCH_S))[0])
            if not ready and left <= 0:
                self.dead = f"no answer within {CALL_TIMEOUT_S:g} s"
            elif not ready and self.watched and self.stopped():
                self.dead = _FOUND_STOPPED  # nothing of ours would ever continue it
        line = os.read(self.reply, 4096).decode(errors="replace").strip() if ready else ""
        if ready and not line:
            self.dead = "worker exited"
        if self.dead:
            self.proc.kill()
            return self.dead
        fields = line.split()
        if fields[0] != "ok":
            return line
        if len(fields) == 3 and fields[1].isdigit() and fields[2].isdigit():
            self.cpu_s, self.continued = int(fields[1]) / 1e9, int(fields[2])
        return ""

    def call(self, x: np.ndarray) -> tuple[float, str]:
        """Seconds from writing the input to the answer, and an error ('' when fine)."""
        if self.dead:
            return 0.0, self.dead
        start = time.perf_counter()
        self.x[: len(x)] = x
        try:
            os.write(self.cmd, f"{len(x)}\n".encode())
        except OSError:  # it is gone (killed, perhaps by another process)
            self.dead = "worker exited"
            return 0.0, self.dead
        error = self._wait_reply()
        return time.perf_counter() - start, error

    def stopped(self) -> bool:
        found = _stat(f"/proc/{self.proc.pid}/stat")
        return found is not None and found[1] in "Tt"

    def close(self) -> None:
        os.close(self.cmd)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _invalid(note: str) -> dict[str, Any]:
    return {"valid": False, "note": note}


class Judge:
    """Times every sample; interference, once seen, invalidates every sample from then on."""

    def __init__(self, ref: Worker, cand: Worker, run_seed: int, tampered: str = "") -> None:
        self.ref, self.cand, self.run_seed = ref, cand, run_seed
        self.candidate = Candidate(ref.proc.pid, cand.proc.pid)
        self.tampered = tampered

    def _interference(self) -> str:
        if _continued[0]:
            return "the driver was stopped by another process (a SIGCONT arrived)"
        if self.ref.continued:
            return "the reference worker was stopped by another process (a SIGCONT arrived)"
        return ""

    def _time_reference(self, x: np.ndarray) -> tuple[float, str]:
        """The reference's CPU seconds on ``x``, every candidate process paused meanwhile."""
        problem = self.candidate.pause()
        try:
            if problem:
                return 0.0, f"candidate: {problem}"
            if self.ref.stopped():
                self.ref.dead = _FOUND_STOPPED
                self.ref.proc.kill()
            _, error = self.ref.call(x)
            if self.ref.dead == _FOUND_STOPPED:
                self.tampered = _FOUND_STOPPED
                return 0.0, _FOUND_STOPPED
            return self.ref.cpu_s, f"reference: {error}" if error else ""
        finally:
            self.candidate.resume()

    def measure(self, item: dict[str, Any]) -> dict[str, Any]:
        """One sample: medians of ``REPEATS`` timed repeats after one warm-up."""
        self.tampered = self.tampered or self._interference()
        if self.tampered:
            return _invalid(self.tampered)
        if self.cand.dead:
            return _invalid(f"candidate: {self.cand.dead}")
        n, seed = int(item["n"]), int(item["seed"])
        if not 0 < n <= MAX_N:
            return _invalid(f"n={n} out of range")
        t_ref: list[float] = []
        t_cand: list[float] = []
        for repeat in range(REPEATS + 1):  # repeat 0 warms both up and is not counted
            x = np.random.default_rng([seed, self.run_seed, repeat]).standard_normal(n)
            y = np.empty(0)
            for candidates_turn in (repeat % 2 == 0, repeat % 2 == 1):  # even: candidate first
                if candidates_turn:
                    seconds, error = self.cand.call(x)
                    y = self.cand.y[:n].copy()  # its answer as given: later writes do not count
                    error = f"candidate: {error}" if error else ""
                    t_cand.append(seconds)
                else:
                    seconds, error = self._time_reference(x)
                    t_ref.append(seconds)
                if error:
                    return _invalid(error)
            self.tampered = self.tampered or self._interference()
            if self.tampered:
                return _invalid(self.tampered)
            if not np.allclose(y, self.ref.y[:n], rtol=1e-7, atol=1e-9):
                return _invalid(f"wrong output at n={n} (repeat {repeat})")
        return {
            "valid": True,
            "t_reference": statistics.median(t_ref[1:]),
            "t_candidate": statistics.median(t_cand[1:]),
            "note": "",
        }


def _own_source() -> str:
    """This program's text: the argument after ``-c`` in our own command line."""
    with open("/proc/self/cmdline", "rb") as handle:
        args = handle.read().split(b"\0")
    return args[args.index(b"-c") + 1].decode()


def main(argv: list[str]) -> None:
    """Parent: read inputs, start both workers, time every sample, print one line each."""
    source = _own_source()
    undumpable = _prctl(_PR_SET_DUMPABLE, 0)
    # Without it, a process the candidate orphans would leave our tree and escape the pause.
    reaper = _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    signal.signal(signal.SIGCONT, _count_continue)
    run_seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else 0
    items = [json.loads(line) for line in sys.stdin if line.strip()]
    ref = Worker("reference", source)
    cand = Worker("candidate", source)
    judge = Judge(ref, cand, run_seed, "" if reaper else "the driver could not become a subreaper")
    for item in items:
        result = judge.measure(item["input"])
        if result["valid"] and not undumpable:
            result["note"] = "could not make the driver non-dumpable"
        print(json.dumps({"id": item["id"], "output": result}), flush=True)
    ref.close()
    cand.close()
    judge.candidate.kill()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    else:
        main(sys.argv[1:])
