"""A task's own limits on its jobs (``[limits]`` in task.toml), within ceilings of the lab.

An experiment's jobs (train, predict, fold evaluations) run under :data:`EXPERIMENT_LIMITS`
with the task's values in place of the defaults it names. The controller's own jobs (the
baseline and every candidate's evaluation on the private tiers) run under
:data:`CONTROLLER_LIMITS`, raised where the task raises an experiment's limit, in the same
proportion as the defaults (1.5 times the wall clock, 3 times the CPU time, twice the memory,
the same processes, output, file and disk): the controller judges the same code on tiers that
may be larger, so its jobs never get less than an experiment's, and a task that lowers a
limit lowers only its experiments' (the controller keeps its default).
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from pydantic import Field, field_validator

from rsilab.records import Model
from rsilab.sandbox.base import Limits

MIB = 1024 * 1024

EXPERIMENT_LIMITS = Limits(wall_s=600.0, cpu_s=1200.0)
"""An experiment's jobs, when the task sets no limit: 600 s wall, 1,200 CPU s, 2,048 MiB
memory, 128 processes, 8 MiB of stdout and of stderr, 512 MiB a file, 1,024 MiB of disk."""

CONTROLLER_LIMITS = Limits(wall_s=900.0, cpu_s=3600.0, memory_mb=4096)
"""The controller's jobs, when the task sets no limit."""

_FIELD = {  # task.toml key -> (Limits field, its unit in task.toml, bytes per unit)
    "wall": ("wall_s", "s", 1),
    "cpu": ("cpu_s", "CPU s", 1),
    "memory": ("memory_mb", "MiB", 1),
    "processes": ("processes", "processes", 1),
    "output": ("output_bytes", "MiB", MIB),
    "file": ("file_mb", "MiB", 1),
    "disk": ("disk_mb", "MiB", 1),
}
_WHAT = {  # task.toml key -> what its number counts, for messages
    "wall": "seconds of wall-clock time",
    "cpu": "CPU seconds",
    "memory": "MiB of memory",
    "processes": "processes and threads",
    "output": "MiB of stdout (and of stderr)",
    "file": "MiB of its largest file",
    "disk": "MiB of disk",
}

CEILINGS: dict[str, float] = {
    "wall": 86_400,  # a day
    "cpu": 864_000,  # ten days of one core
    "memory": 262_144,  # 256 GiB
    "processes": 4_096,
    "output": 1_024,
    "file": 65_536,
    "disk": 262_144,
}
"""The most a task may set, per key: the lab allows no more to one job."""


class TaskLimits(Model):
    """Limits of an experiment's jobs that the task sets; each omitted one keeps the default
    (see the module docstring for the controller's jobs)."""

    wall: float | None = Field(default=None, description="Wall-clock seconds of one job.")
    cpu: float | None = Field(default=None, description="CPU seconds of one job's processes.")
    memory: int | None = Field(default=None, description="Resident memory (MiB), whole tree.")
    processes: int | None = Field(default=None, description="Processes and threads at once.")
    output: int | None = Field(default=None, description="MiB of stdout, and of stderr, each.")
    file: int | None = Field(default=None, description="The largest file it writes (MiB).")
    disk: int | None = Field(
        default=None, description="MiB it writes to its workspace and /tmp (the workspace's size)."
    )

    @field_validator("wall", "cpu", "memory", "processes", "output", "file", "disk", mode="before")
    @classmethod
    def _a_number(cls, value: Any) -> Any:
        if isinstance(value, bool) or (value is not None and not isinstance(value, int | float)):
            raise ValueError(f"{value!r} is not a number")
        return value

    @field_validator("wall", "cpu", "memory", "processes", "output", "file", "disk")
    @classmethod
    def _within_ceiling(cls, value: float | None, info: Any) -> float | None:
        if value is None:
            return None
        key = str(info.field_name)
        unit = _FIELD[key][1]
        if not value > 0:
            raise ValueError(
                f"{value:g} is not positive: give the {_WHAT[key]} a job may use, above 0"
            )
        ceiling = CEILINGS[key]
        if value > ceiling:
            raise ValueError(
                f"{value:g} {unit} is above the most the lab allows one job ({ceiling:,.0f} "
                f"{unit}): give at most that"
            )
        return value

    def given(self) -> dict[str, float]:
        """The keys the task sets, with their values (in task.toml's units)."""
        return {k: float(v) for k, v in self.model_dump().items() if v is not None}

    def over(self, base: Limits) -> Limits:
        """``base`` with the values the task sets in place of its own."""
        return replace(base, **{_FIELD[k][0]: _native(k, v) for k, v in self.given().items()})

    def controller(self, base: Limits = CONTROLLER_LIMITS) -> Limits:
        """The controller's limits: ``base``, raised to each experiment limit the task sets
        times the defaults' proportion (never below the experiment's, never below ``base``)."""
        raised = {}
        for key, value in self.given().items():
            name = _FIELD[key][0]
            ratio = getattr(CONTROLLER_LIMITS, name) / getattr(EXPERIMENT_LIMITS, name)
            wanted = _native(key, value * max(ratio, 1.0))
            raised[name] = max(getattr(base, name), wanted)
        return replace(base, **raised)


def _native(key: str, value: float) -> Any:
    """A task.toml value as the :class:`Limits` field holds it (bytes for output; whole
    numbers for all but the two times)."""
    name, _, scale = _FIELD[key]
    kind = next(f.type for f in fields(Limits) if f.name == name)
    whole = kind in (int, "int")
    return round(value * scale) if whole else value * scale


def describe(limits: Limits) -> str:
    """``limits`` in task.toml's keys and units, on one line."""
    parts = []
    for key, (name, unit, scale) in _FIELD.items():
        value = getattr(limits, name) / scale
        parts.append(f"{key} {value:,.0f} {unit}" if unit != "processes" else f"{key} {value:g}")
    return ", ".join(parts)
