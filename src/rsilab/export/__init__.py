"""Copies of a campaign's records in other tools' formats (a face: it only reads the lab).

:func:`export_mlflow` writes a campaign to an MLflow tracking store as runs: a parent run
for the campaign, a child per experiment and per accepted version. The copy is idempotent
(runs are found again by their ``rsilab.record_id`` tag) and marked as a copy: every run
names the lab and the ledger position it was copied at. :func:`follow_mlflow` keeps copying
while the campaign runs. mlflow is an optional dependency (the ``mlflow`` extra).
"""

from __future__ import annotations

from rsilab.export._export import (
    DEFAULT_INTERVAL_S,
    experiment_name_for,
    export_mlflow,
    follow_mlflow,
)
from rsilab.export._mlflow import ExportError, ExportResult, MlflowMissing
from rsilab.export._plan import RECORD_TAG

__all__ = [
    "DEFAULT_INTERVAL_S",
    "RECORD_TAG",
    "ExportError",
    "ExportResult",
    "MlflowMissing",
    "experiment_name_for",
    "export_mlflow",
    "follow_mlflow",
]
