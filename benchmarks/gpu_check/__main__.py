"""``python -m benchmarks.gpu_check [--dry-run]``: see check.py."""

from benchmarks.gpu_check.check import main

main()
