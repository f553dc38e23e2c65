"""Running jobs: the Executor ABC, JSON job records, and the local slot executor."""

from rsilab.executors.base import Executor, JobResult, JobSpec, JobState
from rsilab.executors.local import LocalExecutor, available_cores

__all__ = ["Executor", "JobResult", "JobSpec", "JobState", "LocalExecutor", "available_cores"]
