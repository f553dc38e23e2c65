"""The orchestrator: campaigns, the research DAG, teams and rounds (layer 2).

One face per subpackage, from the bottom up:

- :mod:`.writer` and :mod:`.door`: the orchestrator's one way to write records itself, and
  its agents' one way to act (the Experiment OS tools, with a role);
- :mod:`.research`: the research DAG, lock-in measures, guidance, a team's campaign review;
- :mod:`.campaign`: the lifecycle (start, resume, stop, end) every kind of run goes through;
- :mod:`.builtin` and :mod:`.llm`: the policies (who decides), alone or as a team;
- :mod:`.rounds`: an evolution's rounds, one campaign each;
- :mod:`.api`: ``rsilab.run`` and ``rsilab.resume``; :mod:`.report`: a campaign's report.

Agents act only through the tools; what the orchestrator records itself goes through
:func:`.writer.write`.
"""

from __future__ import annotations

from rsilab.orchestrator.research.dag import DagEdge, ResearchDag
from rsilab.orchestrator.research.measures import LockInMeasures, lock_in_measures

__all__ = ["DagEdge", "LockInMeasures", "ResearchDag", "lock_in_measures"]
