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
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import select
import statistics
import subprocess
import sys
import time
from typing import Any

import numpy as np

REPEATS = 5
CALL_TIMEOUT_S = 20.0
MAX_N = 1 << 16
WINDOW = 16


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


def _no_dump() -> bool:
    try:
        return bool(ctypes.CDLL(None).prctl(4, 0, 0, 0, 0) == 0)  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        return False


def _views(buf: mmap.mmap) -> tuple[np.ndarray, np.ndarray]:
    both = np.frombuffer(buf, dtype=np.float64)
    return both[:MAX_N], both[MAX_N:]


def _worker(role: str, fd: int, cmd_fd: int, reply_fd: int) -> None:
    if role == "reference":
        _no_dump()
        fn = reference
    else:
        sys.path.insert(0, os.getcwd())
        import kernel  # type: ignore[import-not-found]  # the candidate, from the workspace

        fn = kernel.kernel
    buf = mmap.mmap(fd, 16 * MAX_N)
    x_all, y_all = _views(buf)
    with os.fdopen(cmd_fd, "rb", buffering=0) as cmd, os.fdopen(reply_fd, "wb", 0) as reply:
        reply.write(b"ok\n")
        while line := cmd.readline():
            n = int(line)
            try:
                y = np.asarray(fn(x_all[:n]), dtype=np.float64)
                if y.shape != (n,):
                    raise ValueError(f"output shape {y.shape}, expected ({n},)")
                y_all[:n] = y
                reply.write(b"ok\n")
            except Exception as exc:
                message = f"error {type(exc).__name__}: {exc}".replace("\n", " ")[:300]
                reply.write(message.encode() + b"\n")


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
        self._wait_reply()

    def _wait_reply(self) -> str:
        if self.dead:
            return self.dead
        ready, _, _ = select.select([self.reply], [], [], CALL_TIMEOUT_S)
        line = os.read(self.reply, 4096).decode(errors="replace").strip() if ready else ""
        if not ready:
            self.dead = f"no answer within {CALL_TIMEOUT_S:g} s"
        elif not line:
            self.dead = "worker exited"
        if self.dead:
            self.proc.kill()
            return self.dead
        return "" if line == "ok" else line

    def call(self, x: np.ndarray) -> tuple[float, str]:
        """Seconds from writing the input to the answer, and an error ('' when fine)."""
        if self.dead:
            return 0.0, self.dead
        start = time.perf_counter()
        self.x[: len(x)] = x
        os.write(self.cmd, f"{len(x)}\n".encode())
        error = self._wait_reply()
        return time.perf_counter() - start, error

    def close(self) -> None:
        os.close(self.cmd)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _measure(ref: Worker, cand: Worker, item: dict[str, Any], run_seed: int) -> dict[str, Any]:
    n, seed = int(item["n"]), int(item["seed"])
    if not 0 < n <= MAX_N:
        return {"valid": False, "note": f"n={n} out of range"}
    t_ref: list[float] = []
    t_cand: list[float] = []
    for repeat in range(REPEATS + 1):  # repeat 0 warms both up and is not counted
        x = np.random.default_rng([seed, run_seed, repeat]).standard_normal(n)
        order = (ref, cand) if repeat % 2 else (cand, ref)
        times: dict[int, float] = {}
        for worker in order:
            seconds, error = worker.call(x)
            if error:
                who = "reference" if worker is ref else "candidate"
                return {"valid": False, "note": f"{who}: {error}"}
            times[id(worker)] = seconds
        if not np.allclose(cand.y[:n], ref.y[:n], rtol=1e-7, atol=1e-9):
            return {"valid": False, "note": f"wrong output at n={n} (repeat {repeat})"}
        if repeat:
            t_ref.append(times[id(ref)])
            t_cand.append(times[id(cand)])
    return {
        "valid": True,
        "t_reference": statistics.median(t_ref),
        "t_candidate": statistics.median(t_cand),
        "note": "" if _DUMPABLE_OFF else "could not make the driver non-dumpable",
    }


_DUMPABLE_OFF = False


def _own_source() -> str:
    """This program's text: the argument after ``-c`` in our own command line."""
    with open("/proc/self/cmdline", "rb") as handle:
        args = handle.read().split(b"\0")
    return args[args.index(b"-c") + 1].decode()


def main(argv: list[str]) -> None:
    """Parent: read inputs, start both workers, time every sample, print one line each."""
    global _DUMPABLE_OFF
    source = _own_source()
    _DUMPABLE_OFF = _no_dump()
    run_seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else 0
    items = [json.loads(line) for line in sys.stdin if line.strip()]
    ref = Worker("reference", source)
    cand = Worker("candidate", source)
    for item in items:
        if cand.dead:
            result: dict[str, Any] = {"valid": False, "note": f"candidate: {cand.dead}"}
        else:
            result = _measure(ref, cand, item["input"], run_seed)
        print(json.dumps({"id": item["id"], "output": result}), flush=True)
    ref.close()
    cand.close()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    else:
        main(sys.argv[1:])
