"""kernel end to end: the reference passes, a wrong kernel is invalid, numpy is faster.

Only relative, robust assertions: the speed targets belong in the benchmarks.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rsilab.records import DataTier
from rsilab.sandbox.base import Sandbox
from rsilab.tasks import Outcome, get_task, run_experiment

FAST = """\
import numpy as np
WINDOW = 16
def kernel(x):
    c = np.concatenate(([0.0], np.cumsum(x)))
    i = np.arange(len(x))
    lo = np.maximum(0, i - WINDOW + 1)
    return (c[i + 1] - c[lo]) / (i + 1 - lo)
"""

WRONG = "import numpy as np\ndef kernel(x):\n    return np.cumsum(x)\n"
BROKEN = "raise ImportError('no luck')\n"
CLOCK_PATCH = """\
import time
time.perf_counter = lambda: 0.0
from reference_copy import kernel
"""


def _run(tmp_path: Path, sandbox: Sandbox, secret: bytes, source: str | None) -> Outcome:
    task = get_task("kernel")
    workspace = tmp_path / "ws"
    shutil.copytree(task.harness, workspace)
    if source is not None:
        shutil.copy(workspace / "kernel.py", workspace / "reference_copy.py")
        (workspace / "kernel.py").write_text(source)
    return run_experiment(task, sandbox, secret, seed=3, workspace=workspace, tier=DataTier.TRAIN)


def test_the_reference_passes(tmp_path: Path, sandbox: Sandbox, secret: bytes) -> None:
    outcome = _run(tmp_path, sandbox, secret, None)
    assert [s.valid for s in outcome.samples["speedup"]] == [True, True, True]
    assert all(s.score > 0 for s in outcome.samples["speedup"])


@pytest.mark.parametrize(
    ("source", "note"), [(WRONG, "wrong output at n=512"), (BROKEN, "candidate: worker exited")]
)
def test_a_wrong_or_broken_kernel_is_invalid(
    tmp_path: Path, sandbox: Sandbox, secret: bytes, source: str, note: str
) -> None:
    scored = _run(tmp_path, sandbox, secret, source).samples["speedup"]
    assert [(s.valid, s.score) for s in scored] == [(False, 0.0)] * 3
    assert scored[0].note.startswith(note)


def test_a_numpy_kernel_is_faster(tmp_path: Path, sandbox: Sandbox, secret: bytes) -> None:
    outcome = _run(tmp_path, sandbox, secret, FAST)
    assert all(s.valid for s in outcome.samples["speedup"])
    assert outcome.scores["speedup"] > 1.0


def test_patching_the_clock_gains_nothing(tmp_path: Path, sandbox: Sandbox, secret: bytes) -> None:
    """The candidate's process is not the one holding the clock."""
    outcome = _run(tmp_path, sandbox, secret, CLOCK_PATCH)
    assert all(s.valid for s in outcome.samples["speedup"])
    assert outcome.scores["speedup"] < 3.0


# Candidates that attack the measurement. Each computes with a copy of the original loop, so
# honestly timed its speedup is about 1; interference that slowed the reference would show as
# far more. They find the driver (their parent) and the reference worker (its other child).
ATTACK = """\
import os, signal, threading, time
from reference_copy import WINDOW, kernel

def _family():
    me, parent = os.getpid(), os.getppid()
    siblings = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me:
            try:
                with open(f"/proc/{name}/stat") as handle:
                    text = handle.read()
            except OSError:
                continue
            if int(text[text.rindex(")") + 2 :].split()[1]) == parent:
                siblings.append(int(name))
    return parent, siblings[0]

DRIVER, REFERENCE = _family()

def forever(step):
    def loop():
        while True:
            step()
    threading.Thread(target=loop, daemon=True).start()
"""

STOP_AND_CONTINUE_LOOP = """
def step():
    os.kill(REFERENCE, signal.SIGSTOP)
    time.sleep(0.004)
    os.kill(REFERENCE, signal.SIGCONT)
    time.sleep(0.001)
forever(step)
"""
STOP_FOR_GOOD = "os.kill(REFERENCE, signal.SIGSTOP)\n"
STOP_WHILE_I_RUN = """
_own = kernel
def kernel(x):
    os.kill(REFERENCE, signal.SIGSTOP)
    try:
        return _own(x)
    finally:
        os.kill(REFERENCE, signal.SIGCONT)
"""
STOP_THE_DRIVER = """
def step():
    os.kill(DRIVER, signal.SIGSTOP)
    time.sleep(0.003)
    os.kill(DRIVER, signal.SIGCONT)
    time.sleep(0.001)
forever(step)
"""
KILL = "os.kill(REFERENCE, signal.SIGKILL)\n"
# The deadlock STOP_THE_DRIVER can hit by chance (the driver pauses the candidate just as the
# candidate stops the driver), made certain: nothing in the job is left to continue anything.
STOP_THE_DRIVER_AND_ITSELF = """
os.kill(DRIVER, signal.SIGSTOP)
os.kill(os.getpid(), signal.SIGSTOP)
"""

STARVE = """
def _running(pid):
    with open(f"/proc/{pid}/stat") as handle:
        text = handle.read()
    return text[text.rindex(")") + 2] == "R"

def _spin():
    # Burn CPU whenever the reference runs, until the driver is gone.
    while True:
        try:
            os.kill(DRIVER, 0)
            busy = _running(REFERENCE)
        except OSError:
            return
        end = time.monotonic() + (0.002 if busy else 0.0)
        while time.monotonic() < end:
            pass
        if not busy:
            time.sleep(0.0002)

os.setpriority(os.PRIO_PROCESS, REFERENCE, 19)
for _ in range(4):
    middle = os.fork()
    if middle == 0:
        if os.fork() == 0:  # an orphan: it leaves the candidate's process tree
            os.setpriority(os.PRIO_PROCESS, 0, 0)
            _spin()
        os._exit(0)
    os.waitpid(middle, 0)
"""


@pytest.mark.parametrize(
    ("attack", "note"),
    [
        (STOP_AND_CONTINUE_LOOP, "the reference worker was stopped by another process"),
        (STOP_FOR_GOOD, "the reference worker was stopped by another process (found stopped)"),
        (STOP_WHILE_I_RUN, "the reference worker was stopped by another process (a SIGCONT"),
        (STOP_THE_DRIVER, "the driver was stopped by another process (a SIGCONT arrived)"),
        (STOP_THE_DRIVER_AND_ITSELF, "the driver was stopped by another process (a SIGCONT"),
        (KILL, "reference: worker exited"),
    ],
    ids=[
        "stop-loop",
        "stop-for-good",
        "stop-while-candidate-runs",
        "stop-driver",
        "stop-driver-and-itself",
        "kill",
    ],
)
def test_signalling_the_reference_or_the_driver_invalidates_every_sample(
    tmp_path: Path, sandbox: Sandbox, secret: bytes, attack: str, note: str
) -> None:
    scored = _run(tmp_path, sandbox, secret, ATTACK + attack).samples["speedup"]
    assert [(s.valid, s.score) for s in scored] == [(False, 0.0)] * 3
    assert all(s.note.startswith(note) for s in scored), [s.note for s in scored]


def test_starving_the_reference_gains_nothing(
    tmp_path: Path, sandbox: Sandbox, secret: bytes
) -> None:
    """Reniced, and busy orphans spinning while it runs: its time stays its own."""
    scored = _run(tmp_path, sandbox, secret, ATTACK + STARVE).samples["speedup"]
    assert all(s.valid for s in scored), [s.note for s in scored]
    assert max(s.score for s in scored) < 1.6, [s.score for s in scored]


PAUSE_PROBE = """
import importlib.util, json, os, subprocess, sys, time
spec = importlib.util.spec_from_file_location("driver", sys.argv[1])
d = importlib.util.module_from_spec(spec)
spec.loader.exec_module(d)

def state(pid):
    found = d._stat(f"/proc/{pid}/stat")
    return found[1] if found else "gone"

def settle(pids, stopped):
    deadline = time.monotonic() + 5
    while any((state(p) in "Tt") != stopped for p in pids) and time.monotonic() < deadline:
        time.sleep(0.001)
    return {str(p): state(p) for p in pids}

assert d._prctl(d._PR_SET_CHILD_SUBREAPER, 1)
idle = "import sys; sys.stdin.read()"
spin = "while True: pass"
maker = (
    "import os, sys\\n"
    "if os.fork() == 0:\\n"
    "    child = os.fork()\\n"
    "    if child:\\n"
    "        print(child, flush=True)\\n"
    "        os._exit(0)\\n"
    f"    exec({spin!r})\\n"
    f"exec({spin!r})\\n"
)
ref = subprocess.Popen([sys.executable, "-c", idle], stdin=subprocess.PIPE)
cand = subprocess.Popen([sys.executable, "-c", maker], stdout=subprocess.PIPE)
orphan = int(cand.stdout.readline())
deadline = time.monotonic() + 5
while d._stat(f"/proc/{orphan}/stat")[0] != os.getpid() and time.monotonic() < deadline:
    time.sleep(0.001)  # its parent exits: a subreaper's orphan comes to it
box = d.Candidate(ref.pid, cand.pid)
problem = box.pause()
paused = settle([cand.pid, orphan], True)
reference = state(ref.pid)
box.resume()
resumed = settle([cand.pid, orphan], False)
box.kill()
os.kill(orphan, 9)  # were it not ours, box.kill() would miss it
ref.stdin.close()
ref.wait()
print(json.dumps({"problem": problem, "paused": paused, "reference": reference,
                  "resumed": resumed, "pids": [cand.pid, orphan]}))
"""


def test_pausing_the_candidate_stops_its_orphans_but_not_the_reference() -> None:
    """A process the candidate forks and orphans comes to the driver (a subreaper) and is
    paused with the rest; the reference keeps running; resuming lets them all run again."""
    driver = Path(get_task("kernel").harness).parent / "_driver.py"
    done = subprocess.run(
        [sys.executable, "-c", PAUSE_PROBE, str(driver)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    found = json.loads(done.stdout)
    cand, orphan = (str(pid) for pid in found["pids"])
    assert found["problem"] == ""
    assert found["paused"] == {cand: "T", orphan: "T"}
    assert found["reference"] not in "Tt"
    assert all(state in "RS" for state in found["resumed"].values()), found["resumed"]
