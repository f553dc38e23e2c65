"""The chaos run: a campaign killed at named fault points and at random times, resumed each time.

:mod:`benchmarks.chaos.driver` runs it (``rsilab run`` and ``rsilab resume`` as
subprocesses, each under :mod:`benchmarks.chaos._reaper`, which finds what a killed run left
running) and keeps a :mod:`benchmarks.chaos.snapshot` of the lab after each kill;
:mod:`benchmarks.chaos.counts` counts, from the records and the host, what the kills cost.
``benchmarks/bench_chaos.py`` prints the table; ``tests/benchmarks/test_chaos.py`` runs a
small one. The fault points themselves are :mod:`rsilab.faults`.
"""
