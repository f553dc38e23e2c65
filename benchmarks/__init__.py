"""rsilab benchmarks: run with `make bench`; results go to BENCHMARKS.md."""
