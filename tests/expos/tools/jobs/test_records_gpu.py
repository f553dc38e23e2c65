"""An experiment's resources sum its jobs' GPU time and keep the largest GPU memory peak;
without a GPU job the GPU fields stay None (unmeasured), never zero."""

from __future__ import annotations

from rsilab.expos.tools.jobs._records import total
from rsilab.records import Resources


def test_gpu_time_sums_and_the_memory_peak_is_the_largest() -> None:
    used = total(
        [
            Resources(cpu_s=1.0, wall_s=2.0, gpu_s=2.0, gpu_memory_mb=900.0),
            Resources(cpu_s=1.0, wall_s=3.0),  # a CPU job (a scorer, say)
            Resources(cpu_s=2.0, wall_s=4.0, gpu_s=8.0, gpu_memory_mb=None),  # no nvidia-smi
        ]
    )
    assert (used.cpu_s, used.wall_s, used.gpu_s, used.gpu_memory_mb) == (4.0, 9.0, 10.0, 900.0)


def test_without_gpu_jobs_the_gpu_fields_stay_none() -> None:
    used = total([Resources(cpu_s=1.0, wall_s=2.0), Resources(cpu_s=1.0, wall_s=1.0)])
    assert used.gpu_s is None and used.gpu_memory_mb is None
