"""Writing run plans to an MLflow tracking store with MLflow's own client.

Idempotent by construction: a run is found again by its ``rsilab.record_id`` tag (searched
within the campaign's runs of one lab), params are written once, a point is written only if
the run's history of that key does not already hold it, a gauge only when it changed, and the
plan's digest is tagged last, so a run whose digest matches is left alone and an export cut
short is finished by the next one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rsilab.errors import RsilabError, UserError
from rsilab.export._plan import (
    CAMPAIGN_TAG,
    DIGEST_TAG,
    HEAD_TAG,
    LAB_TAG,
    RECORD_TAG,
    RunPlan,
    RunStatus,
)

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Run

    from rsilab.export._runs import Snapshot

TELEMETRY_ENV = "MLFLOW_DISABLE_TELEMETRY"
MAX_PARAM_CHARS = 6000
MAX_TAG_CHARS = 8000
"""MLflow's limits on a param's and a tag's value (mlflow.utils.validation)."""
_BATCH = 100
"""Params and tags per ``log_batch`` call (MLflow allows 100 of each, 1000 metrics)."""
_NOISY_LOGGERS = ("mlflow.store.db.utils", "alembic.runtime.migration")
"""Loggers that announce, at INFO, the creation of a new SQLite tracking database."""


class MlflowMissing(UserError):
    """The ``mlflow`` package is not installed in rsilab's environment."""

    def __init__(self) -> None:
        super().__init__(
            "exporting to MLflow needs the mlflow package, which is not installed",
            "install rsilab's mlflow extra: pip install 'rsilab[mlflow]'",
        )


class ExportError(RsilabError):
    """The tracking store refused the export or holds runs that contradict the records."""


@dataclass
class ExportResult:
    """What one export wrote, and where."""

    tracking_uri: str
    experiment_name: str
    experiment_id: str
    campaign_id: str
    campaign_state: str
    ledger_head: str
    run_ids: dict[str, str] = field(default_factory=dict)
    """Record id -> MLflow run id, the campaign's run first."""
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    values_logged: int = 0
    """Metric values written by this export (0 when nothing changed)."""

    @property
    def parent_run_id(self) -> str:
        """The campaign's run."""
        return self.run_ids[self.campaign_id]


def load_client(tracking_uri: str | None) -> MlflowClient:
    """MLflow's client for ``tracking_uri``, or for MLflow's own default when None
    (``MLFLOW_TRACKING_URI``, else MLflow's local default), with MLflow's telemetry off unless
    ``MLFLOW_DISABLE_TELEMETRY`` says otherwise. Raises MlflowMissing."""
    # MLflow 3 reports usage to its makers over the network unless told not to; rsilab makes
    # no connection but to the tracking store it is given (a person may still opt in).
    os.environ.setdefault(TELEMETRY_ENV, "true")
    try:
        from mlflow import MlflowClient
    except ImportError as exc:
        raise MlflowMissing() from exc
    with quiet_store_setup():  # the client opens (and may create) the store right away
        return MlflowClient(tracking_uri=tracking_uri)


def resolved_uri(client: MlflowClient) -> str:
    """The tracking URI the client writes to."""
    return str(client.tracking_uri)


@contextlib.contextmanager
def quiet_store_setup() -> Iterator[None]:
    """Silence MLflow's INFO lines about creating a new SQLite database while inside."""
    loggers = [logging.getLogger(name) for name in _NOISY_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


class MlflowWriter:
    """Writes a campaign's snapshots into one MLflow experiment through ``client``."""

    def __init__(self, client: MlflowClient, experiment_name: str) -> None:
        self.client = client
        self.experiment_name = experiment_name
        self._experiment_id: str | None = None

    def write(self, snapshot: Snapshot) -> ExportResult:
        """Find or create each run of ``snapshot`` and bring it up to its plan.

        Raises ExportError when the store refuses a write, when two runs claim one record, or
        when a run's logged param differs from the record (params cannot change in MLflow).
        """
        from mlflow.exceptions import MlflowException

        try:
            return self._write(snapshot)
        except MlflowException as exc:
            raise ExportError(f"MLflow refused the export: {exc.message}") from exc

    def _write(self, snapshot: Snapshot) -> ExportResult:
        experiment_id = self._experiment(snapshot.lab_id)
        seq, digest = snapshot.head
        result = ExportResult(
            tracking_uri=resolved_uri(self.client),
            experiment_name=self.experiment_name,
            experiment_id=experiment_id,
            campaign_id=snapshot.campaign.id,
            campaign_state=str(snapshot.campaign.state),
            ledger_head=f"{seq}:{digest}",
        )
        found = self._runs(experiment_id, snapshot)
        for plan in snapshot.runs:
            parent = result.run_ids.get(plan.parent_record_id or "")
            run = found.get(plan.record_id)
            if run is None:
                run = self._create(experiment_id, plan, parent)
                result.created += 1
            elif run.data.tags.get(DIGEST_TAG) == plan.digest():
                result.run_ids[plan.record_id] = run.info.run_id
                result.unchanged += 1
                continue
            else:
                result.updated += 1
            result.run_ids[plan.record_id] = run.info.run_id
            result.values_logged += self._sync(run, plan, parent, result.ledger_head, seq)
        return result

    def _experiment(self, lab_id: str) -> str:
        """The id of the MLflow experiment, created when missing; ExportError if deleted."""
        if self._experiment_id is not None:
            return self._experiment_id
        found = self.client.get_experiment_by_name(self.experiment_name)
        if found is None:
            made = self.client.create_experiment(self.experiment_name, tags={LAB_TAG: lab_id})
            self._experiment_id = str(made)
            return self._experiment_id
        if found.lifecycle_stage != "active":
            raise ExportError(
                f"MLflow experiment {self.experiment_name!r} is deleted; restore it "
                f"(mlflow experiments restore --experiment-id {found.experiment_id}) or "
                "export to another one (--experiment NAME)"
            )
        self._experiment_id = str(found.experiment_id)
        return self._experiment_id

    def _runs(self, experiment_id: str, snapshot: Snapshot) -> dict[str, Run]:
        """The campaign's runs already in the experiment, by record id."""
        query = (
            f"tags.`{CAMPAIGN_TAG}` = '{snapshot.campaign.id}' "
            f"and tags.`{LAB_TAG}` = '{snapshot.lab_id}'"
        )
        out: dict[str, Run] = {}
        token: str | None = None
        while True:
            page = self.client.search_runs([experiment_id], query, page_token=token)
            for run in page:
                record = run.data.tags.get(RECORD_TAG, "")
                if record in out:
                    raise ExportError(
                        f"two MLflow runs copy record {record} ({out[record].info.run_id} and "
                        f"{run.info.run_id}); delete one and export again"
                    )
                out[record] = run
            token = page.token
            if not token:
                return out

    def _create(self, experiment_id: str, plan: RunPlan, parent: str | None) -> Run:
        tags = {RECORD_TAG: plan.record_id, **_identity(plan)}
        if parent is not None:
            tags["mlflow.parentRunId"] = parent
        return self.client.create_run(
            experiment_id, start_time=plan.start_ms, tags=tags, run_name=plan.name
        )

    def _sync(self, run: Run, plan: RunPlan, parent: str | None, head: str, seq: int) -> int:
        """Write what ``run`` lacks of ``plan``; the number of metric values written."""
        from mlflow.entities import Param, RunTag

        run_id = run.info.run_id
        params = [Param(k, v) for k, v in self._new_params(run, plan).items()]
        wanted = {**plan.tags, HEAD_TAG: head}
        if parent is not None:
            wanted["mlflow.parentRunId"] = parent
        cut = {k: _cut(v, MAX_TAG_CHARS) for k, v in sorted(wanted.items())}
        tags = [RunTag(k, v) for k, v in cut.items() if run.data.tags.get(k) != v]
        metrics = self._new_points(run, plan) + _changed_gauges(run, plan, seq)
        for start in range(0, max(len(params), len(tags), len(metrics), 1), _BATCH):
            self.client.log_batch(
                run_id,
                metrics=metrics[start : start + _BATCH],
                params=params[start : start + _BATCH],
                tags=tags[start : start + _BATCH],
                synchronous=True,
            )
        self._set_status(run, plan)
        self.client.set_tag(run_id, DIGEST_TAG, plan.digest())  # last: the run is whole now
        return len(metrics)

    @staticmethod
    def _new_params(run: Run, plan: RunPlan) -> dict[str, str]:
        """Params the run lacks; ExportError for one logged with another value."""
        logged: dict[str, str] = run.data.params
        new = {}
        for key, value in plan.params.items():
            value = _cut(value, MAX_PARAM_CHARS)
            if key not in logged:
                new[key] = value
            elif logged[key] != value:
                raise ExportError(
                    f"MLflow run {run.info.run_id} has param {key}={logged[key]!r} but "
                    f"{plan.record_id} says {value!r}; MLflow params cannot change: delete the "
                    "run and export again"
                )
        return new

    def _new_points(self, run: Run, plan: RunPlan) -> list[Metric]:
        """The plan's points the run's history does not hold yet (counted, so a value that
        occurs twice in the records is written twice, and never a third time)."""
        from mlflow.entities import Metric

        keys = {p.key for p in plan.points}
        held: Counter[tuple[str, int, int, float]] = Counter()
        for key in sorted(keys & set(run.data.metrics)):
            for m in self.client.get_metric_history(run.info.run_id, key):
                held[(key, m.step, m.timestamp, m.value)] += 1
        out = []
        for p in plan.points:
            ident = (p.key, p.step, p.timestamp_ms, p.value)
            if held[ident]:
                held[ident] -= 1
            else:
                out.append(Metric(p.key, p.value, p.timestamp_ms, p.step))
        return out

    def _set_status(self, run: Run, plan: RunPlan) -> None:
        info = run.info
        if plan.name != info.run_name:
            self.client.update_run(info.run_id, name=plan.name)
        if plan.status is RunStatus.RUNNING:
            if info.status != plan.status:
                self.client.update_run(info.run_id, status=str(plan.status))
        elif (info.status, info.end_time) != (plan.status, plan.end_ms):
            self.client.set_terminated(info.run_id, status=str(plan.status), end_time=plan.end_ms)


def _identity(plan: RunPlan) -> dict[str, str]:
    """The tags a run is searched by."""
    return {k: plan.tags[k] for k in (CAMPAIGN_TAG, LAB_TAG) if k in plan.tags}


def _changed_gauges(run: Run, plan: RunPlan, seq: int) -> list[Metric]:
    """Gauges whose value differs from the run's latest, stepped by the ledger position (so
    the latest value is always the one of the newest export)."""
    from mlflow.entities import Metric

    latest: dict[str, Any] = run.data.metrics
    now = int(time.time() * 1000)
    return [
        Metric(key, value, now, seq)
        for key, value in sorted(plan.gauges.items())
        if latest.get(key) != value
    ]


def _cut(value: str, limit: int) -> str:
    """``value`` within MLflow's ``limit``: longer text is cut and says so (the record keeps
    it whole)."""
    if len(value) <= limit:
        return value
    marker = " [cut; the whole text is in the rsilab record]"
    return value[: limit - len(marker)] + marker
