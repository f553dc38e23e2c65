"""LocalExecutor: slots, thread shares, logs as artifacts, killed and crashing jobs."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pytest

from rsilab.executors import (
    Executor,
    JobResult,
    JobSpec,
    JobState,
    LocalExecutor,
    available_cores,
)
from rsilab.sandbox import KillReason, Mount, ProcessSandbox
from rsilab.store.artifacts import ArtifactStore
from tests.sandbox.helpers import QUICK, wait_until


def job(
    tmp_path: Path, name: str, code: str, on: Executor | None = None, **fields: object
) -> JobSpec:
    """A job running ``python -c code`` in its own workspace under ``tmp_path`` (a workspace
    of executor ``on``: the sandbox user's, as jobs must write there)."""
    workspace = on.workspace(tmp_path / name) if on is not None else tmp_path / name
    workspace.mkdir(exist_ok=True)
    fields.setdefault("limits", QUICK)
    return JobSpec(name=name, argv=["python", "-c", code], workspace=workspace, **fields)  # type: ignore[arg-type]


def test_slots_run_jobs_at_the_same_time(executor: LocalExecutor, tmp_path: Path) -> None:
    meeting = executor.workspace(tmp_path / "meeting")
    # Each job announces itself and waits (up to 20 s) for the other: only parallel slots meet.
    code = (
        "import os, sys, time\n"
        f"m = {str(meeting)!r}\n"
        "open(os.path.join(m, sys.argv[1]), 'w').close()\n"
        "deadline = time.monotonic() + 20\n"
        "while len(os.listdir(m)) < 2 and time.monotonic() < deadline:\n"
        "    time.sleep(0.02)\n"
        "print(len(os.listdir(m)))\n"
    )
    mounts = [Mount.same(meeting, writable=True)]
    jobs = [job(tmp_path, f"j{i}", code, executor, mounts=mounts) for i in range(2)]
    jobs = [j.model_copy(update={"argv": [*j.argv, j.name]}) for j in jobs]
    results = executor.run_all(jobs)
    stdouts = [executor.artifacts.read_bytes(r.stdout_sha256) for r in results]
    assert stdouts == [b"2\n", b"2\n"], [r.notes for r in results]
    assert all(r.resources.wall_s < 20 for r in results)


def test_each_job_gets_its_share_of_the_cores(executor: LocalExecutor, tmp_path: Path) -> None:
    code = "import os; print(os.environ['OMP_NUM_THREADS'], os.environ['TORCH_NUM_THREADS'])"
    result = executor.run(job(tmp_path, "threads", code, executor))
    share = max(1, available_cores() // 2)
    assert result.threads == share == executor.threads_per_job
    assert executor.artifacts.read_bytes(result.stdout_sha256).split() == [str(share).encode()] * 2
    explicit = executor.run(job(tmp_path, "explicit", code, executor, threads=5))
    assert explicit.threads == 5


def test_logs_are_stored_as_artifacts(executor: LocalExecutor, tmp_path: Path) -> None:
    code = "import sys; print('to stdout'); print('to stderr', file=sys.stderr)"
    result = executor.run(job(tmp_path, "logs", code, executor))
    assert result.state is JobState.SUCCEEDED and result.ok
    logs = {result.stdout_sha256: b"to stdout\n", result.stderr_sha256: b"to stderr\n"}
    for sha, text in logs.items():
        assert sha == hashlib.sha256(text).hexdigest()
        assert executor.artifacts.read_bytes(sha) == text
    assert result.stdout_bytes == len(b"to stdout\n")
    assert result.resources.wall_s > 0 and result.resources.cpu_s > 0
    assert result.sandbox == executor.sandbox.name


def test_a_job_over_a_limit_is_recorded_as_killed(executor: LocalExecutor, tmp_path: Path) -> None:
    limits = replace(QUICK, wall_s=1)
    result = executor.run(
        job(tmp_path, "slow", "import time; time.sleep(60)", executor, limits=limits)
    )
    assert result.state is JobState.KILLED
    assert result.kill_reason is KillReason.WALL_TIME
    noisy = replace(QUICK, output_bytes=1000)
    loud = executor.run(job(tmp_path, "loud", "print('x' * 5000)", executor, limits=noisy))
    assert (loud.state, loud.kill_reason, loud.stdout_truncated) == (
        JobState.KILLED,
        KillReason.OUTPUT,
        True,
    )
    assert loud.stdout_bytes == 1000


def test_a_crashing_job_does_not_disturb_the_others(
    executor: LocalExecutor, tmp_path: Path
) -> None:
    crash = "import os, signal; print('partial', flush=True); os.kill(os.getpid(), signal.SIGSEGV)"
    jobs = [
        job(tmp_path, "crash", crash, executor),
        job(tmp_path, "fails", "raise SystemExit(2)", executor),
        job(tmp_path, "fine-1", "print('ok')", executor),
        job(tmp_path, "fine-2", "print('ok')", executor),
    ]
    results = {r.name: r for r in executor.run_all(jobs)}
    assert (results["crash"].state, results["crash"].signal) == (JobState.FAILED, 11)
    assert executor.artifacts.read_bytes(results["crash"].stdout_sha256) == b"partial\n"
    assert (results["fails"].state, results["fails"].exit_code) == (JobState.FAILED, 2)
    for name in ("fine-1", "fine-2"):
        assert results[name].ok
    assert executor.run(job(tmp_path, "after", "print('still fine')", executor)).ok


def test_submitting_after_shutdown_is_refused(artifacts: ArtifactStore, tmp_path: Path) -> None:
    executor = LocalExecutor(ProcessSandbox(), artifacts, slots=1)
    executor.shutdown()
    executor.shutdown()  # idempotent
    with pytest.raises(RuntimeError):
        executor.submit(job(tmp_path, "late", "pass"))
    with pytest.raises(ValueError):
        LocalExecutor(ProcessSandbox(), artifacts, slots=0)


def test_an_invalid_job_fails_its_future_not_the_executor(
    artifacts: ArtifactStore, tmp_path: Path
) -> None:
    with LocalExecutor(ProcessSandbox(), artifacts, slots=1) as executor:
        missing = JobSpec(name="missing", argv=["true"], workspace=tmp_path / "nowhere")
        with pytest.raises(ValueError, match="not a folder"):
            executor.run(missing)
        assert executor.run(job(tmp_path, "next", "pass")).ok


def test_job_spec_round_trips_through_json(tmp_path: Path) -> None:
    spec = JobSpec(
        name="train",
        argv=["python", "train.py", "--seed", "3"],
        workspace=tmp_path,
        limits=replace(QUICK, memory_mb=256),
        env={"A": "1"},
        stdin=b"\x00\xff binary",
        threads=2,
        mounts=[Mount(tmp_path, Path("/data"))],
        hidden=[tmp_path / "raw.csv"],
    )
    text = spec.model_dump_json()
    assert json.loads(text)["limits"]["memory_mb"] == 256
    assert JobSpec.model_validate_json(text) == spec
    with pytest.raises(ValueError):
        JobSpec.model_validate_json(json.dumps({**json.loads(text), "pickle": "no"}))


def test_job_result_round_trips_through_json(artifacts: ArtifactStore, tmp_path: Path) -> None:
    with LocalExecutor(ProcessSandbox(), artifacts) as executor:
        result = executor.run(job(tmp_path, "r", "print(1)"))
    assert JobResult.model_validate_json(result.model_dump_json()) == result


def test_cancel_kills_a_running_job_and_drops_a_queued_one(
    artifacts: ArtifactStore, tmp_path: Path
) -> None:
    sleeper = "import time; open('started', 'w').close(); time.sleep(30)"
    with LocalExecutor(ProcessSandbox(), artifacts, slots=1) as executor:
        running = executor.submit(job(tmp_path, "running", sleeper))
        queued = executor.submit(job(tmp_path, "queued", sleeper))
        assert wait_until(lambda: (tmp_path / "running" / "started").exists())
        assert executor.cancel("queued") and executor.cancel("running")
        first, second = running.result(timeout=10), queued.result(timeout=10)
        assert not executor.cancel("running") and not executor.cancel("no-such-job")
    assert (first.state, first.kill_reason) == (JobState.KILLED, KillReason.CANCELLED)
    assert first.resources.wall_s < 10
    assert (second.state, second.kill_reason) == (JobState.KILLED, KillReason.CANCELLED)
    assert second.notes == ["cancelled before it started"]
    assert not (tmp_path / "queued" / "started").exists()


def test_the_executor_tells_its_sandboxs_disk_limits(executor: LocalExecutor) -> None:
    assert executor.disk_limits() == executor.sandbox.disk_limits()
