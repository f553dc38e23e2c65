"""The search-efficiency benchmark's parts: policies, the proposal protocol, the report.

See :mod:`benchmarks.bench_search` for the suite and what its table says.
"""
