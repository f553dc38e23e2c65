"""The Experiment OS benches serve the orchestrator's tests too."""

from __future__ import annotations

from tests.expos.conftest import any_bench, bench, lab

__all__ = ["any_bench", "bench", "lab"]
