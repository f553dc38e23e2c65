"""The GPU end-to-end check: see check.py and docs/gpu.md."""
