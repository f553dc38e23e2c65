"""What the sandbox's shared types say to a person: why a job was ended."""

from __future__ import annotations

import pytest

from rsilab.sandbox.base import KillReason, Limits, why_killed

LIMITS = Limits(
    cpu_s=7.5, memory_mb=300, processes=9, wall_s=42, output_bytes=3 * 2**20, disk_mb=64
)


@pytest.mark.parametrize(
    ("reason", "said"),
    [
        ("wall_time", "it ran past its wall-clock limit of 42 s"),
        ("cpu_time", "it used more than its 7.5 CPU seconds"),
        ("memory", "its memory passed its limit of 300 MiB"),
        ("processes", "it had more than 9 processes or threads at once"),
        ("output", "it printed more than 3 MiB on stdout or stderr: print less, or write the "
         "log to a file"),
        ("disk", "it wrote more than 64 MiB to its workspace or /tmp"),
        ("cancelled", "it was cancelled before it finished"),
    ],
)  # fmt: skip
def test_each_kill_names_its_limit_with_the_value_the_job_had(reason: str, said: str) -> None:
    assert why_killed(KillReason(reason), LIMITS) == said


def test_every_kill_reason_is_explained() -> None:
    assert len({why_killed(r, Limits()) for r in KillReason}) == len(KillReason) == 7
