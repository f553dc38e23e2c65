"""Run one command as a child subreaper; report how it ended and what it left running.

``python benchmarks/chaos/_reaper.py REPORT GRACE_S -- ARGV...`` (run by path: it imports
nothing of rsilab or the benchmarks) starts ARGV and waits for it.
SIGUSR1 to this process SIGKILLs the command (at once, as a power cut would; sent by the
chaos driver, which cannot safely signal a grandchild's pid itself). As a child subreaper
(``PR_SET_CHILD_SUBREAPER``), this process becomes the parent of every process the command
left behind, whatever session or process group they moved to. GRACE_S seconds after the
command ended, those still running are its *leftovers*: each is written down (pid, process
group, state, kernel wait channel and stack, pending signals, command line), then killed with
its group and reaped, so it does not disturb the next run; one frozen in a cgroup cannot be
killed and is left as it is (see :func:`frozen_by`). REPORT gets one JSON object: the
command's pid, its return code (negative: the signal that ended it) and the leftovers.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PR_SET_CHILD_SUBREAPER = 36


def _children() -> list[int]:
    """Pids of this process's live children (zombies are reaped, not listed)."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{entry}/stat").read_text()
            fields = stat[stat.rfind(")") + 2 :].split()
            if int(fields[1]) == me and fields[0] != "Z":
                found.append(int(entry))
    return found


def _describe(pid: int) -> dict[str, Any]:
    def read(name: str) -> str:
        try:
            return Path(f"/proc/{pid}/{name}").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            return ""

    stat = read("stat")
    pgid = -1
    with contextlib.suppress(OSError):
        pgid = os.getpgid(pid)
    return {
        "pid": pid,
        "pgid": pgid,
        "state": stat[stat.rfind(")") + 2 :].split()[0] if stat else "",
        "wchan": read("wchan"),
        "stack": read("stack")[:300],
        "pending": " ".join(
            line for line in read_lines(pid, "status") if line.startswith(("SigPnd", "ShdPnd"))
        ),
        "cmdline": read("cmdline")[:300],
    }


def read_lines(pid: int, name: str) -> list[str]:
    try:
        return Path(f"/proc/{pid}/{name}").read_text().splitlines()
    except OSError:
        return []


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] != 0:
            pass


def frozen_by(pid: int) -> str:
    """The freeze control file of the cgroup that holds ``pid`` frozen (cgroup v1's
    ``freezer.state``, v2's ``cgroup.freeze``); '' when it is not frozen. A frozen process
    cannot die, SIGKILL or not, until that cgroup is thawed."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return ""
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            freeze = Path("/sys/fs/cgroup") / path.lstrip("/") / "cgroup.freeze"
            if freeze.is_file() and freeze.read_text().strip() == "1":
                return str(freeze)
        elif "freezer" in controllers.split(","):
            state = Path("/sys/fs/cgroup/freezer") / path.lstrip("/") / "freezer.state"
            if state.is_file() and state.read_text().strip() != "THAWED":
                return str(state)
    return ""


def _sweep(deadline_s: float = 5.0) -> list[dict[str, Any]]:
    """Write down, kill and reap every child left, and the ones each death hands us; each
    once, with how long it outlived the SIGKILL (``survived_s``; -1: still there at the
    deadline). A leftover frozen in a cgroup (``frozen``: the file that thaws it) is left
    frozen, as it would be without this process: the resumed campaign meets it, and the
    chaos driver thaws it at the end."""
    left: dict[int, dict[str, Any]] = {}
    start = time.monotonic()
    while True:
        _reap()
        pids = [p for p in _children() if not left.get(p, {}).get("frozen")]
        now = time.monotonic()
        for pid, found in left.items():
            if pid not in pids and "survived_s" not in found and not found["frozen"]:
                found["survived_s"] = round(now - start, 2)
        if not pids or now - start > deadline_s:
            break
        for pid in pids:
            found = left.setdefault(pid, _describe(pid))
            with contextlib.suppress(OSError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(OSError, ValueError):
                found["frozen"] = frozen_by(pid)
        time.sleep(0.05)
    for found in left.values():
        found.setdefault("survived_s", -1)
    return list(left.values())


def main(argv: list[str]) -> int:
    report, grace, sep, *command = argv
    if sep != "--" or not command:
        print(__doc__, file=sys.stderr)
        return 2
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    proc: subprocess.Popen[bytes] | None = None

    def kill(*_: object) -> None:
        if proc is not None:
            proc.kill()  # Popen checks it was not reaped yet, so no other pid is hit

    signal.signal(signal.SIGUSR1, kill)
    proc = subprocess.Popen(command)
    returncode = proc.wait()
    time.sleep(float(grace))
    left = [p for p in _sweep() if p["pid"] != proc.pid]
    Path(report).write_text(
        json.dumps({"pid": proc.pid, "returncode": returncode, "leftovers": left})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
