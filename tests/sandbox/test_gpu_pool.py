"""GpuPool and GpuSampler: distinct GPUs for jobs held at once, waiting for a free one, and
the memory of a job's GPUs sampled from nvidia-smi (a stand-in script here: no GPU)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from rsilab.sandbox import ProcessSandbox, RunSpec
from rsilab.sandbox._gpu_pool import GpuPool, GpuSampler, run_holding_gpus
from tests.sandbox.gpu_nodes import make_dev_root
from tests.sandbox.helpers import py


def test_jobs_held_at_once_get_distinct_gpus() -> None:
    pool = GpuPool([0, 1, 2])
    with pool.hold(2) as first, pool.hold(1) as second:
        assert first == (0, 1)
        assert second == (2,)
    with pool.hold(3) as all_three:  # all were handed back
        assert all_three == (0, 1, 2)


def test_a_job_waits_for_a_gpu_another_job_holds() -> None:
    pool = GpuPool([0])
    got: list[tuple[int, ...]] = []
    released = threading.Event()

    def second() -> None:
        with pool.hold(1) as devices:
            got.append(devices)
            assert released.is_set(), "got the GPU while the first job held it"

    with pool.hold(1):
        waiter = threading.Thread(target=second)
        waiter.start()
        waiter.join(0.6)
        assert waiter.is_alive() and got == []  # still waiting
        released.set()
    waiter.join(10)
    assert got == [(0,)]


def test_cancel_ends_the_wait_without_gpus() -> None:
    pool = GpuPool([0])
    cancel = threading.Event()
    with pool.hold(1):
        cancel.set()
        with pool.hold(1, cancel) as devices:
            assert devices == ()


def test_more_gpus_than_the_machine_has_is_refused(tmp_path: Path) -> None:
    spec = RunSpec(("true",), tmp_path, gpus=2)
    with pytest.raises(ValueError, match="needs 2 GPU\\(s\\); this machine has 1"):
        GpuPool([0]).run(ProcessSandbox(), spec)  # refused before the sandbox is used


def test_the_sampler_sums_the_jobs_gpus_only(tmp_path: Path) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n"
        "echo 'GPU-a, 101, 300'\n"
        "echo 'GPU-a, 102, 200'\n"
        "echo 'GPU-b, 103, 7000'\n"  # another GPU: another job's
        "echo 'GPU-a, 104, [N/A]'\n"
    )
    smi.chmod(0o755)
    sampler = GpuSampler({"GPU-a"}, command=[str(smi)])
    sampler.start()
    assert sampler.stop() == 500.0
    every = GpuSampler(None, command=[str(smi)])
    every.sample()
    assert every.peak_mb == 7500.0


def test_the_sampler_says_none_when_nothing_could_be_read(tmp_path: Path) -> None:
    sampler = GpuSampler({"GPU-a"}, command=[str(tmp_path / "no-such-nvidia-smi")])
    sampler.start()
    assert sampler.stop() is None


def test_run_holding_gpus_refuses_more_than_the_machine_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "dev").mkdir()
    monkeypatch.setenv("RSILAB_GPU_DEV_ROOT", str(tmp_path / "dev"))
    with pytest.raises(ValueError, match="needs 1 GPU\\(s\\); this machine has 0"):
        run_holding_gpus(ProcessSandbox(), RunSpec(("true",), tmp_path, gpus=1))


def test_run_holding_gpus_gives_a_job_a_gpu_of_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_dev_root(tmp_path, ["nvidia4"])
    monkeypatch.setenv("RSILAB_GPU_DEV_ROOT", str(root))
    code = "import os; print(os.environ['CUDA_VISIBLE_DEVICES'])"
    result = run_holding_gpus(ProcessSandbox(), py(tmp_path, code, gpus=1))
    assert result.ok and result.stdout.decode().strip() == "4"
