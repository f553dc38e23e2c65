"""Running jobs: the Executor ABC, JSON job records, the local slot executor and the Ray
executor (Ray itself is imported only when a :class:`RayExecutor` is made)."""

from rsilab.executors._ray_choice import ExecutorChoice, executor_from_table, parse_executor
from rsilab.executors.base import Executor, JobInterrupted, JobResult, JobSpec, JobState
from rsilab.executors.local import LocalExecutor, available_cores
from rsilab.executors.ray import RayExecutor

__all__ = [
    "Executor",
    "ExecutorChoice",
    "JobInterrupted",
    "JobResult",
    "JobSpec",
    "JobState",
    "LocalExecutor",
    "RayExecutor",
    "available_cores",
    "executor_from_table",
    "parse_executor",
]
