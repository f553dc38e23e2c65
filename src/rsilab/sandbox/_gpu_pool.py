"""GPUs for jobs: each running job its own (:class:`GpuPool`), and what it used (:class:`GpuUse`).

A job whose spec asks for ``gpus = N`` waits until N GPUs are free, holds them while it runs,
and hands them back when it ends; two jobs of this process never hold the same GPU at once
(one pool per process: :func:`host_gpus`; two rsilab processes on one machine do not
coordinate). The sandbox then shows the job those GPUs' device nodes alone
(:mod:`rsilab.sandbox._gpu`). Executors run GPU jobs through :meth:`GpuPool.run`; code that
runs a sandbox directly (``rsilab task check --run``) through :func:`run_holding_gpus`.

While the job runs, ``nvidia-smi --query-compute-apps`` is sampled every half second and the
memory of the processes on the job's GPUs summed: the job's, since no other job holds them
(a program outside rsilab using the same GPU would be counted too). The peak is the largest
sum seen, a lower bound (a spike between samples is missed). GPU-seconds are the GPUs held
times the job's wall time. Where ``nvidia-smi`` is missing or never answers, or the GPUs
cannot be told apart, the memory peak is None: not measured, never a made-up zero.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from rsilab.sandbox._gpu import dev_root, gpu_numbers, gpu_uuids
from rsilab.sandbox.base import RunResult, RunSpec, Sandbox

QUERY = (
    "nvidia-smi",
    "--query-compute-apps=gpu_uuid,pid,used_memory",
    "--format=csv,noheader,nounits",
)
"""The sampling command: one ``uuid, pid, MiB`` line per process using a GPU."""
SAMPLE_EVERY_S = 0.5


@dataclass(frozen=True)
class GpuUse:
    """What one job used of its GPUs: ``gpu_s`` (GPUs x wall seconds) and the peak memory
    of its processes in MiB (None: not measured)."""

    gpus: int
    gpu_s: float
    peak_memory_mb: float | None


class GpuSampler:
    """Samples ``command`` (default :data:`QUERY`) in a thread between :meth:`start` and
    :meth:`stop`; ``peak_mb`` is the largest per-sample sum of the memory of processes on
    ``uuids`` (every GPU when ``uuids`` is None), or None when no sample could be read."""

    def __init__(self, uuids: set[str] | None, command: Sequence[str] = QUERY) -> None:
        self.uuids = uuids
        self.command = tuple(command)
        self.peak_mb: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rsilab-gpu-sample", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> float | None:
        """End sampling; the peak."""
        self._stop.set()
        self._thread.join()
        return self.peak_mb

    def _loop(self) -> None:
        self.sample()
        while not self._stop.wait(SAMPLE_EVERY_S):
            self.sample()

    def sample(self) -> None:
        """One reading; a failed one (no nvidia-smi, a timeout, an error) changes nothing."""
        try:
            done = subprocess.run(self.command, capture_output=True, timeout=10, check=True)
        except (OSError, subprocess.SubprocessError):
            return
        total = 0.0
        for line in done.stdout.decode(errors="replace").splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != 3 or (self.uuids is not None and parts[0] not in self.uuids):
                continue
            try:
                total += float(parts[2])
            except ValueError:  # "[N/A]" where the driver hides per-process memory
                continue
        self.peak_mb = total if self.peak_mb is None else max(self.peak_mb, total)


class GpuPool:
    """The GPUs of this machine (``numbers``, default: its ``/dev/nvidiaN`` nodes), handed to
    jobs so that no two running jobs share one. Thread-safe."""

    def __init__(self, numbers: Sequence[int] | None = None) -> None:
        self.numbers = tuple(gpu_numbers() if numbers is None else numbers)
        self._free = set(self.numbers)
        self._changed = threading.Condition()

    @contextmanager
    def hold(self, count: int, cancel: threading.Event | None = None) -> Iterator[tuple[int, ...]]:
        """``count`` free GPUs, the lowest numbers first, held for the block; waits until
        enough are free. Yields fewer (none) when ``cancel`` is set while waiting.

        Raises:
            ValueError: this machine has fewer than ``count`` GPUs (it would wait forever).
        """
        if count > len(self.numbers):
            raise ValueError(
                f"the job needs {count} GPU(s); this machine has {len(self.numbers)}: "
                "run it where there are enough, or set gpus lower in harness.toml"
            )
        with self._changed:
            while len(self._free) < count:
                if cancel is not None and cancel.is_set():
                    break
                self._changed.wait(0.2)
            held = tuple(sorted(self._free)[:count]) if len(self._free) >= count else ()
            self._free -= set(held)
        try:
            yield held
        finally:
            with self._changed:
                self._free |= set(held)
                self._changed.notify_all()

    def run(self, sandbox: Sandbox, spec: RunSpec) -> tuple[RunResult | None, GpuUse | None]:
        """Run ``spec`` on ``spec.gpus`` GPUs of their own: its result and GPU use (None
        for a job without GPUs); ``(None, None)`` when it was cancelled before it started
        (while queued or waiting for GPUs).

        Raises:
            ValueError: more GPUs wanted than this machine has; what ``sandbox.run`` raises.
        """
        if spec.cancel is not None and spec.cancel.is_set():
            return None, None
        if spec.gpus == 0:
            return sandbox.run(spec), None
        with self.hold(spec.gpus, spec.cancel) as devices:
            if len(devices) < spec.gpus:
                return None, None
            sampler = _sampler_for(devices, len(self.numbers))
            if sampler is not None:
                sampler.start()
            try:
                result = sandbox.run(replace(spec, gpu_devices=devices))
            finally:
                peak = sampler.stop() if sampler is not None else None
        return result, GpuUse(spec.gpus, spec.gpus * result.wall_s, peak)


def _sampler_for(devices: Sequence[int], machine_gpus: int) -> GpuSampler | None:
    """A sampler of ``devices``' processes; on a one-GPU machine whose driver files are
    unreadable, of every process (the one GPU is the job's); None where the job's GPUs
    cannot be told from others (its memory is then not measured)."""
    known = gpu_uuids()
    if all(d in known for d in devices):
        return GpuSampler({known[d] for d in devices})
    return GpuSampler(None) if machine_gpus == 1 else None


def host_gpus() -> GpuPool:
    """This process's pool of this machine's GPUs: one per device folder (see
    :func:`rsilab.sandbox._gpu.dev_root`), its nodes read at first use."""
    return _pool_of(dev_root())


@cache
def _pool_of(root: Path) -> GpuPool:
    return GpuPool(gpu_numbers(root))


def run_holding_gpus(sandbox: Sandbox, spec: RunSpec) -> RunResult:
    """``sandbox.run(spec)``, with ``spec.gpus`` GPUs of :func:`host_gpus` held for it where
    none were assigned; for callers that run a sandbox without an executor.

    Raises:
        ValueError: more GPUs wanted than this machine has; what ``sandbox.run`` raises.
    """
    if spec.gpus == 0 or spec.gpu_devices:
        return sandbox.run(spec)
    with host_gpus().hold(spec.gpus, spec.cancel) as devices:
        return sandbox.run(replace(spec, gpu_devices=devices))
