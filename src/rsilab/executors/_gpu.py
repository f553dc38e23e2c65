"""A job's GPU use in its record: GPU-seconds and the GPU memory peak (see
:mod:`rsilab.sandbox._gpu_pool`, which assigns GPUs and measures them)."""

from __future__ import annotations

from rsilab.executors.base import JobResult
from rsilab.sandbox._gpu_pool import GpuUse


def with_gpu_use(result: JobResult, use: GpuUse | None) -> JobResult:
    """``result`` with its GPU-seconds and GPU memory peak (unchanged for a job without
    GPUs: those fields stay None)."""
    if use is None:
        return result
    resources = result.resources.model_copy(
        update={"gpu_s": use.gpu_s, "gpu_memory_mb": use.peak_memory_mb}
    )
    return result.model_copy(update={"resources": resources})
