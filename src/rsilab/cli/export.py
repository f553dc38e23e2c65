"""``rsilab export mlflow CAMPAIGN``: a campaign's records copied into MLflow as runs."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Annotated

import typer

from rsilab.cli._common import (
    EXIT_RUNTIME_FAILURE,
    MARKUP,
    JsonOption,
    LabOption,
    ctrl_c_requests,
    messages_console,
    print_json,
    reading_stored_data,
    report_user_error,
)
from rsilab.errors import UserError
from rsilab.export import (
    DEFAULT_INTERVAL_S,
    ExportError,
    ExportResult,
    MlflowMissing,
    export_mlflow,
    follow_mlflow,
)
from rsilab.expos.campaigns import find_campaign
from rsilab.store import Lab, Store

export_app = typer.Typer(
    help="Copy a campaign's records into an experiment tracker.",
    no_args_is_help=True,
    rich_markup_mode=MARKUP,
)


@export_app.command("mlflow")
def mlflow(
    campaign: Annotated[str, typer.Argument(metavar="CAMPAIGN", help="Campaign id, or 'latest'.")],
    tracking_uri: Annotated[
        str | None,
        typer.Option(
            "--tracking-uri",
            metavar="URI",
            help="MLflow tracking URI (sqlite:///PATH.db, http://HOST:PORT, ...). Default: "
            "MLflow's own: $MLFLOW_TRACKING_URI, else its local default (./mlflow.db in "
            "MLflow 3).",
            show_default=False,
        ),
    ] = None,
    experiment: Annotated[
        str | None,
        typer.Option(
            "--experiment",
            metavar="NAME",
            help="MLflow experiment to write to. Default: rsilab-TASK.",
            show_default=False,
        ),
    ] = None,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            "-f",
            help="Keep exporting while the campaign runs, to its end or Ctrl-C.",
        ),
    ] = False,
    interval: Annotated[
        float,
        typer.Option("--interval", min=0.1, help="With --follow: seconds between looks."),
    ] = DEFAULT_INTERVAL_S,
    as_json: JsonOption = False,
    lab: LabOption = None,
) -> None:
    """Write the campaign to MLflow: a parent run for the campaign, a child run per experiment
    (config as params, dev scores by step, job resources, direction, actor and role as tags)
    and per accepted version (final-tier scores with intervals, the gain over the baseline,
    the controller's decision, lineage tags).

    Exporting again reuses the same runs (found by their `"rsilab.record_id"` tag) and writes
    only what changed. Every run is tagged as a copy: the lab's id and its ledger head at
    export time; the lab stays the record of truth. Needs the `mlflow` extra.
    """
    out = messages_console(as_json)
    target = _Target(tracking_uri, experiment)
    try:
        with Lab.open(lab) as opened, reading_stored_data():
            found = find_campaign(opened.store, campaign)
            if follow:
                result = _follow(opened.store, found.id, target, interval, as_json)
            else:
                result = export_mlflow(
                    opened.store,
                    found.id,
                    tracking_uri=target.tracking_uri,
                    experiment_name=target.experiment,
                )
                _show(result, as_json)
    except (MlflowMissing, ExportError) as exc:
        # Not a mistake in the command line (exit 2): the environment or the tracker failed.
        report_user_error(exc if isinstance(exc, UserError) else UserError(str(exc)))
        raise typer.Exit(EXIT_RUNTIME_FAILURE) from None
    out.print(_open_hint(result.tracking_uri), soft_wrap=True, markup=False, highlight=False)


@dataclass(frozen=True)
class _Target:
    """Where the runs go: None for MLflow's default URI, or rsilab-TASK as the experiment."""

    tracking_uri: str | None
    experiment: str | None


def _follow(
    store: Store, campaign_id: str, target: _Target, interval: float, as_json: bool
) -> ExportResult:
    """Follow the campaign; a first Ctrl-C ends it after the export under way (exit 0), a
    second at once (exit 130)."""
    stop = threading.Event()
    asked = [0]

    def request() -> int:  # runs in the signal handler: no lock, nothing that can wait
        stop.set()
        asked[0] += 1
        return asked[0]

    with ctrl_c_requests(request, 2):
        return follow_mlflow(
            store,
            campaign_id,
            stop,
            tracking_uri=target.tracking_uri,
            experiment_name=target.experiment,
            interval_s=interval,
            on_export=lambda r: _show(r, as_json, line=True),
        )


def _show(result: ExportResult, as_json: bool, *, line: bool = False) -> None:
    """One export: JSON (one line each with --follow), else one sentence."""
    if as_json:
        print_json(_as_dict(result), line=line)
        return
    changed = f"{result.created} created, {result.updated} updated, {result.unchanged} unchanged"
    typer.echo(
        f"{result.campaign_id} [{result.campaign_state}] at ledger event "
        f"{result.ledger_head.split(':')[0]} -> MLflow experiment {result.experiment_name!r} "
        f"(id {result.experiment_id}), parent run {result.parent_run_id}: "
        f"{len(result.run_ids)} runs ({changed}), {result.values_logged} metric values logged"
    )


def _as_dict(result: ExportResult) -> dict[str, object]:
    return {
        "campaign_id": result.campaign_id,
        "campaign_state": result.campaign_state,
        "ledger_head": result.ledger_head,
        "tracking_uri": result.tracking_uri,
        "experiment_name": result.experiment_name,
        "experiment_id": result.experiment_id,
        "parent_run_id": result.parent_run_id,
        "run_ids": result.run_ids,
        "created": result.created,
        "updated": result.updated,
        "unchanged": result.unchanged,
        "values_logged": result.values_logged,
    }


def _open_hint(uri: str) -> str:
    """How to look at the runs: MLflow's UI on a local store, the server's page otherwise."""
    if uri.startswith(("http://", "https://")):
        return f"open {uri} to see the runs"
    return f"see the runs: mlflow ui --backend-store-uri {uri}  (needs the full mlflow package)"


def register(app: typer.Typer) -> None:
    """Add the ``export`` group to ``app``."""
    app.add_typer(export_app, name="export")
