"""The hacking suite: scripted attacks by goal, run through rsilab and a naive runner.

``attacks.GOALS`` lists the goals and their variants; ``suite.run_suite`` runs them and
``suite.hacking_rate`` gives the headline. ``benchmarks/bench_hacking.py`` prints the table.
"""
