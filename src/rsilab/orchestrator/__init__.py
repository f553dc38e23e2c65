"""The orchestrator: campaigns, the research DAG, teams and rounds (layer 2).

It reads the store and drives the agents through the Experiment OS; it never writes records
behind the tools' back. :class:`ResearchDag` is the read model of a campaign's directions,
and :func:`lock_in_measures` says how narrowly a campaign searched and whether its reviews
changed what the Main agent did next.
"""

from __future__ import annotations

from rsilab.orchestrator.dag import DagEdge, ResearchDag
from rsilab.orchestrator.measures import LockInMeasures, lock_in_measures

__all__ = ["DagEdge", "LockInMeasures", "ResearchDag", "lock_in_measures"]
