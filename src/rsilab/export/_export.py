"""Exporting a campaign once, and following it while it runs."""

from __future__ import annotations

import threading
from collections.abc import Callable

from rsilab.export._mlflow import ExportResult, MlflowWriter, load_client, quiet_store_setup
from rsilab.store import Store

DEFAULT_INTERVAL_S = 2.0
"""How often ``--follow`` looks at the ledger."""


def experiment_name_for(task: str) -> str:
    """The MLflow experiment a task's campaigns go to unless another is named."""
    return f"rsilab-{task}"


def export_mlflow(
    store: Store,
    campaign_id: str,
    *,
    tracking_uri: str | None = None,
    experiment_name: str | None = None,
) -> ExportResult:
    """Write campaign ``campaign_id`` of ``store`` to MLflow: a parent run for the campaign,
    a child run per experiment and per accepted version.

    ``tracking_uri`` None means MLflow's own resolution (``MLFLOW_TRACKING_URI``, else
    MLflow's local default); ``experiment_name`` None means ``rsilab-<task>``. Exporting
    again reuses the same runs and writes only what changed.

    Raises:
        MlflowMissing: the mlflow package is not installed.
        ExportError: the tracking store refused a write or contradicts the records.
        NotFoundError: there is no such campaign.
    """
    return _exporter(store, campaign_id, tracking_uri, experiment_name)()


def follow_mlflow(
    store: Store,
    campaign_id: str,
    stop: threading.Event,
    *,
    tracking_uri: str | None = None,
    experiment_name: str | None = None,
    interval_s: float = DEFAULT_INTERVAL_S,
    on_export: Callable[[ExportResult], None] | None = None,
) -> ExportResult:
    """Export the campaign, then again each time the ledger moves, until the campaign is no
    longer running (after one last export) or ``stop`` is set; the last export's result.

    ``on_export`` sees every export that ran. Raises what :func:`export_mlflow` raises.
    """
    export = _exporter(store, campaign_id, tracking_uri, experiment_name)
    show = on_export or (lambda _: None)
    seen = store.head()
    result = export()
    show(result)
    while result.campaign_state == "running" and not stop.wait(interval_s):
        head = store.head()
        if head == seen:
            continue  # nothing new in the ledger, nothing new to copy
        seen, result = head, export()
        show(result)
    return result


def _exporter(
    store: Store, campaign_id: str, tracking_uri: str | None, experiment_name: str | None
) -> Callable[[], ExportResult]:
    """A function that exports the campaign once more with one client and experiment."""
    # Loaded here, not at import: the command line imports this package on every start.
    from rsilab.export._runs import campaign_snapshot

    client = load_client(tracking_uri)
    writers: list[MlflowWriter] = []  # made on the first export, once the task is known

    def export() -> ExportResult:
        snapshot = campaign_snapshot(store, campaign_id)
        if not writers:
            name = experiment_name or experiment_name_for(snapshot.campaign.task.name)
            writers.append(MlflowWriter(client, name))
        with quiet_store_setup():
            return writers[0].write(snapshot)

    return export
