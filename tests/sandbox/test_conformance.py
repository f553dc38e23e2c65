"""One conformance suite for every sandbox: what any Sandbox promises its callers."""

from __future__ import annotations

import json
import os
import secrets
import signal
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from rsilab.sandbox import KillReason, Limits, RunSpec, Sandbox
from tests.sandbox.helpers import QUICK, processes_with, py, wait_until


def test_echo_stdout_and_stderr(sandbox: Sandbox, workspace: Path) -> None:
    result = sandbox.run(py(workspace, "import sys; print('out'); print('err', file=sys.stderr)"))
    assert result.ok, result
    assert result.stdout == b"out\n"
    assert result.stderr == b"err\n"
    assert result.exit_code == 0 and result.signal is None and result.killed is None
    assert result.wall_s > 0


def test_exit_code_is_reported(sandbox: Sandbox, workspace: Path) -> None:
    result = sandbox.run(py(workspace, "import sys; sys.exit(3)"))
    assert not result.ok
    assert (result.exit_code, result.signal, result.killed) == (3, None, None)


def test_death_by_signal_is_reported(sandbox: Sandbox, workspace: Path) -> None:
    result = sandbox.run(py(workspace, "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"))
    assert (result.exit_code, result.signal, result.killed) == (None, signal.SIGTERM, None)


def test_stdin_is_fed_then_closed(sandbox: Sandbox, workspace: Path) -> None:
    data = b"".join(b'{"x": %d}\n' % i for i in range(20_000))  # larger than a pipe buffer
    result = sandbox.run(
        py(workspace, "import sys; d = sys.stdin.buffer.read(); print(len(d))", stdin=data)
    )
    assert result.ok, result
    assert result.stdout.strip() == str(len(data)).encode()


def test_a_job_that_ignores_stdin_still_finishes(sandbox: Sandbox, workspace: Path) -> None:
    result = sandbox.run(py(workspace, "print('done')", stdin=b"x" * (1 << 20)))
    assert result.ok, result


def test_environment_is_scrubbed(
    sandbox: Sandbox, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RSILAB_HOST_ONLY", "leak")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # a host value the job must not see
    code = "import json, os; print(json.dumps(dict(os.environ)))"
    result = sandbox.run(py(workspace, code, env={"JOB_SETTING": "on"}))
    assert result.ok, result
    env = json.loads(result.stdout)
    assert env["JOB_SETTING"] == "on"
    assert "RSILAB_HOST_ONLY" not in env and "RSILAB_KEY_DIR" not in env
    threads = {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TORCH_NUM_THREADS"}
    allowed = {"PATH", "HOME", "TMPDIR", "LANG", "PWD", "JOB_SETTING", "NUMEXPR_NUM_THREADS"}
    # set to "1" by the runtime's own rsilab_offline.pth as Python starts (a runtime installed
    # before that file existed has neither): the runtime's value, never the host's
    offline = {"HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"}
    assert set(env) <= allowed | threads | offline
    assert all(env[name] == "1" for name in offline & set(env))


def test_thread_variables_follow_threads(sandbox: Sandbox, workspace: Path) -> None:
    code = (
        "import os; print(os.environ['OMP_NUM_THREADS'], os.environ['MKL_NUM_THREADS'],"
        " os.environ['OPENBLAS_NUM_THREADS'], os.environ['TORCH_NUM_THREADS'])"
    )
    result = sandbox.run(py(workspace, code, threads=3))
    assert result.stdout.split() == [b"3"] * 4


def test_working_directory_is_the_workspace(sandbox: Sandbox, workspace: Path) -> None:
    (workspace / "marker.txt").write_text("here")
    result = sandbox.run(py(workspace, "print(open('marker.txt').read())"))
    assert result.stdout == b"here\n", result


def test_workspace_writes_are_visible_on_the_host(sandbox: Sandbox, workspace: Path) -> None:
    owner = workspace.stat().st_uid
    code = (
        "import os; os.makedirs('out/deep'); open('out/deep/model.json', 'w').write('{}');"
        " open('log.txt', 'w').write('trained')"
    )
    result = sandbox.run(py(workspace, code))
    assert result.ok, result
    assert (workspace / "out" / "deep" / "model.json").read_text() == "{}"
    assert (workspace / "log.txt").read_text() == "trained"
    owners = {p.stat().st_uid for p in [workspace, *workspace.rglob("*")]}
    assert owners == {owner}, "files the job wrote belong to the workspace's owner afterwards"


def test_output_over_the_cap_kills_the_job(sandbox: Sandbox, workspace: Path) -> None:
    limits = replace(QUICK, output_bytes=10_000)
    code = "import sys\nwhile True: sys.stdout.write('x' * 1000)"
    result = sandbox.run(py(workspace, code, limits=limits))
    assert result.killed is KillReason.OUTPUT
    assert result.stdout_truncated and not result.stderr_truncated
    assert len(result.stdout) == 10_000


def test_wall_time_kills_the_whole_tree(sandbox: Sandbox, workspace: Path) -> None:
    marker = "rsilab-test-grandchild-" + secrets.token_hex(4)
    grandchild = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        f" open('started', 'w').close(); time.sleep(600)  # {marker}"
    )
    child = (
        "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        f" subprocess.Popen([sys.executable, '-c', {grandchild!r}]); time.sleep(600)"
    )
    main = f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', {child!r}])\n"
    main += "time.sleep(600)"
    limits = replace(QUICK, wall_s=2)
    result = sandbox.run(py(workspace, main, limits=limits))
    assert result.killed is KillReason.WALL_TIME
    assert 2 <= result.wall_s < 10
    assert (workspace / "started").exists(), "the grandchild ran before the kill"
    assert wait_until(lambda: not processes_with(marker)), "the grandchild outlived the job"


def test_cpu_time_limit_kills_the_job(sandbox: Sandbox, workspace: Path) -> None:
    limits = replace(QUICK, cpu_s=1, wall_s=60)  # 1 CPU second, even on a busy machine
    result = sandbox.run(py(workspace, "while True: pass", limits=limits))
    assert result.killed is KillReason.CPU_TIME
    sampled = any("sampled" in note for note in result.notes)  # a lower bound, then
    # The kernel sends SIGXCPU on its own CPU clock; the rusage we report was seen to read
    # 0.89 s for that 1 s on a machine whose both cores were busy, so the bound leaves room.
    assert result.cpu_s >= (0.3 if sampled else 0.75)


def test_file_size_limit_stops_a_large_file(sandbox: Sandbox, workspace: Path) -> None:
    limits = replace(QUICK, file_mb=1)
    code = "open('big', 'wb').write(b'x' * (3 << 20))"
    result = sandbox.run(py(workspace, code, limits=limits))
    assert not result.ok
    assert b"File too large" in result.stderr or result.killed is KillReason.DISK
    assert (workspace / "big").stat().st_size <= 1 << 20


def test_a_job_cannot_fill_more_than_its_workspace(sandbox: Sandbox, workspace: Path) -> None:
    """Killed when the polled size passes the limit, or stopped by ENOSPC where the workspace
    is its own filesystem (``QUICK.disk_mb`` MiB), holding no more than that."""
    limits = replace(QUICK, disk_mb=8, file_mb=4)
    code = "i = 0\nwhile True:\n    open('f%d' % i, 'wb').write(b'x' * (2 << 20)); i += 1"
    result = sandbox.run(py(workspace, code, limits=limits))
    if sandbox.disk_limits().enforced:
        assert result.killed is None and b"No space left on device" in result.stderr, result
        assert sum(p.stat().st_size for p in workspace.iterdir()) <= QUICK.disk_mb << 20
    else:
        assert result.killed is KillReason.DISK, result


def test_a_missing_command_is_a_failed_job(sandbox: Sandbox, workspace: Path) -> None:
    result = sandbox.run(RunSpec(argv=("no-such-command-rsilab",), workspace=workspace))
    assert not result.ok
    assert result.killed is None


def test_invalid_specs_are_refused(sandbox: Sandbox, workspace: Path) -> None:
    with pytest.raises(ValueError, match="argv"):
        sandbox.run(RunSpec(argv=(), workspace=workspace))
    with pytest.raises(ValueError, match="not a folder"):
        sandbox.run(RunSpec(argv=("true",), workspace=workspace / "missing"))
    with pytest.raises(ValueError, match="limit"):
        sandbox.run(RunSpec(argv=("true",), workspace=workspace, limits=Limits(wall_s=0)))
    with pytest.raises(ValueError, match="environment"):
        sandbox.run(RunSpec(argv=("true",), workspace=workspace, env={"A=B": "x"}))


def test_runs_from_several_threads_at_once(sandbox: Sandbox, tmp_path: Path) -> None:
    results: dict[int, bytes] = {}

    def one(i: int) -> None:
        with sandbox.scratch(QUICK.disk_mb, kind="test") as folder:
            results[i] = sandbox.run(py(folder, f"print({i} * 7)")).stdout

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {i: f"{i * 7}\n".encode() for i in range(4)}


def test_resources_are_measured(sandbox: Sandbox, workspace: Path) -> None:
    # Hold 80 MB for a while, part of it busy, so sampling sandboxes see it too.
    code = (
        "import time\nx = b'1' * (80 << 20)\nend = time.process_time() + 0.3\n"
        "while time.process_time() < end: pass\ntime.sleep(0.5)"
    )
    result = sandbox.run(py(workspace, code))
    assert result.ok, result
    assert result.cpu_s > 0.05
    assert result.peak_memory_mb >= 80
    assert os.getpid() > 0  # the caller survives every job


def test_cancel_kills_the_whole_tree_at_once(sandbox: Sandbox, workspace: Path) -> None:
    marker = "rsilab-test-cancelled-" + secrets.token_hex(4)
    child = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        f" open('started', 'w').close(); time.sleep(600)  # {marker}"
    )
    main = f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', {child!r}])\n"
    main += "time.sleep(30)"
    cancel = threading.Event()
    asked: list[float] = []

    def cancel_once_started() -> None:
        if wait_until(lambda: (workspace / "started").exists(), timeout_s=20):
            asked.append(time.monotonic())
        cancel.set()

    thread = threading.Thread(target=cancel_once_started)
    thread.start()
    result = sandbox.run(py(workspace, main, cancel=cancel))
    ended = time.monotonic()
    thread.join()
    assert asked, "the job's child never started"
    assert result.killed is KillReason.CANCELLED and not result.ok
    assert ended - asked[0] < 2.0
    assert wait_until(lambda: not processes_with(marker)), "the child outlived the job"


def test_a_spec_cancelled_before_it_runs_ends_at_once(sandbox: Sandbox, workspace: Path) -> None:
    cancel = threading.Event()
    cancel.set()
    began = time.monotonic()
    result = sandbox.run(py(workspace, "import time; time.sleep(30)", cancel=cancel))
    assert result.killed is KillReason.CANCELLED
    assert time.monotonic() - began < 2.0


def test_disk_limits_say_whether_the_kernel_bounds_a_workspace(sandbox: Sandbox) -> None:
    found = sandbox.disk_limits()
    assert found.reason and "\n" not in found.reason
    if sandbox.name == "process":
        assert not found.enforced
    elif os.geteuid() != 0:
        assert not found.enforced and "not running as root" in found.reason


def test_a_job_starts_with_default_signals_whatever_its_host_ignores_or_blocks(
    sandbox: Sandbox, workspace: Path
) -> None:
    # As a host started in the background by a shell without job control (or by nohup):
    # SIGHUP, SIGINT and SIGQUIT ignored; and a thread that blocks SIGUSR2 when it starts jobs.
    ignored = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT)
    before = {s: signal.signal(s, signal.SIG_IGN) for s in ignored}
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})
    code = (
        "import re; s = open('/proc/self/status').read(); "
        "print(re.search(r'SigIgn:\\s*(\\w+)', s)[1], re.search(r'SigBlk:\\s*(\\w+)', s)[1])"
    )
    try:
        result = sandbox.run(py(workspace, code))
        assert signal.pthread_sigmask(signal.SIG_BLOCK, ()) == {signal.SIGUSR2}  # kept here
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        for sig, handler in before.items():
            signal.signal(sig, handler)
    assert result.ok, result
    ignored_mask, blocked_mask = (int(f, 16) for f in result.stdout.split())
    assert ignored_mask & 0b111 == 0  # SIGHUP (1), SIGINT (2), SIGQUIT (3) at their defaults
    assert blocked_mask == 0


def test_a_job_is_stopped_by_a_signal_its_host_ignores(sandbox: Sandbox, workspace: Path) -> None:
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        result = sandbox.run(py(workspace, "import os, signal; os.kill(os.getpid(), 1)"))
    finally:
        signal.signal(signal.SIGHUP, before)
    assert (result.exit_code, result.signal) == (None, signal.SIGHUP)


@pytest.mark.parametrize("host_umask", [0o077, 0o000])
def test_a_job_writes_with_its_own_umask_whatever_its_hosts(
    sandbox: Sandbox, workspace: Path, host_umask: int
) -> None:
    code = (
        "import os, stat; open('made.txt', 'w').close(); os.mkdir('made'); "
        "print(oct(stat.S_IMODE(os.stat('made.txt').st_mode)), "
        "oct(stat.S_IMODE(os.stat('made').st_mode)))"
    )
    before = os.umask(host_umask)
    try:
        result = sandbox.run(py(workspace, code))
    finally:
        os.umask(before)
    assert result.ok, result
    assert result.stdout.split() == [b"0o644", b"0o755"]


# Two processes of one job that stop each other at once: nothing in the job is left to send
# SIGCONT. The parent forks, the child stops the parent and then itself, the parent waits for
# the child. Left alone the job hangs until its wall-time limit.
MUTUAL_STOP = """
import os, signal, sys, time
parent = os.getpid()
child = os.fork()
if child == 0:
    os.kill(parent, signal.SIGSTOP)
    time.sleep(0.2)  # the parent is stopped by now (a stop is delivered at once)
    os.kill(os.getpid(), signal.SIGSTOP)
    os._exit(7)
_, status = os.waitpid(child, 0)
print("both went on", os.waitstatus_to_exitcode(status))
"""


@pytest.mark.parametrize(
    ("code", "expected", "stops"),
    [
        ("import os, signal; os.kill(os.getpid(), signal.SIGSTOP); print('went on')", "went on", 1),
        (MUTUAL_STOP, "both went on 7", 2),
    ],
    ids=["stops-itself", "two-stop-each-other"],
)
def test_a_job_left_stopped_is_continued_not_hung(
    sandbox: Sandbox, workspace: Path, code: str, expected: str, stops: int
) -> None:
    limits = replace(QUICK, wall_s=25)
    result = sandbox.run(py(workspace, code, limits=limits))
    assert result.ok and result.killed is None, result
    assert result.stdout.decode().strip() == expected
    assert result.wall_s < 15  # the 3 s grace and a scan, far below the wall limit
    note = [n for n in result.notes if "ended by the supervisor (SIGCONT)" in n]
    assert note and note[0].startswith(f"{stops} stop(s)"), result.notes


def test_a_brief_stop_the_job_ends_itself_is_left_alone(sandbox: Sandbox, workspace: Path) -> None:
    code = (
        "import os, signal, time\n"
        "child = os.fork()\n"
        "if child == 0:\n"
        "    time.sleep(3)\n"
        "    os._exit(0)\n"
        "for _ in range(4):\n"
        "    os.kill(child, signal.SIGSTOP); time.sleep(0.8); os.kill(child, signal.SIGCONT)\n"
        "os.waitpid(child, 0)\n"
    )
    result = sandbox.run(py(workspace, code))
    assert result.ok, result
    assert not [n for n in result.notes if "SIGCONT" in n], result.notes
