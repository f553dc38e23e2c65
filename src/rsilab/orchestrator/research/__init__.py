"""The research a campaign records, read and weighed: the DAG of directions, the lock-in
measures, a person's guidance, and a team campaign's closing review."""

from rsilab.orchestrator.research.dag import DagEdge, ResearchDag
from rsilab.orchestrator.research.measures import LockInMeasures, lock_in_measures

__all__ = ["DagEdge", "LockInMeasures", "ResearchDag", "lock_in_measures"]
