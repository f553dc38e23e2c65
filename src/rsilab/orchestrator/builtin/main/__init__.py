"""Main in the built-in policy: its rules (:mod:`._rules`: UCB over directions, the next move)
and what it does with them (:mod:`._agent`: the next step from the records; :mod:`._moves`: its
changes to the research DAG, through the tools)."""
