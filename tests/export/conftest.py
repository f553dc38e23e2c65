"""Fixtures for the export tests: a lab with a finished campaign, and MLflow's real client on
a fresh SQLite tracking store.

The campaign is the one the dashboard tests run (``rsilab run synthetic --budget
experiments=6 --seed 2``, seconds of CPU): its seed proposes a candidate that the controller
accepts, so it has experiments and an accepted version to export. It is built once per
module; the tests only read the lab.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli.helpers import explain, rsilab

# Before any test module imports mlflow: its usage reports would leave this machine.
os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"

MLFLOW_WARNINGS = pytest.mark.filterwarnings(
    # MLflow's SQL store still asks SQLAlchemy 2.1 for its deprecated `noload` strategy.
    "ignore:The ``noload`` loader strategy is deprecated:DeprecationWarning"
)
"""What the tests that drive MLflow's SQL store let pass of the suite's warnings-as-errors."""


@dataclass(frozen=True)
class CampaignLab:
    """A lab holding one finished campaign."""

    path: Path
    key_dir: Path
    campaign_id: str


@pytest.fixture(scope="module")
def campaign_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CampaignLab]:
    """``rsilab init`` and ``rsilab run synthetic --budget experiments=6 --seed 2``."""
    root = tmp_path_factory.mktemp("export-lab")
    path, key_dir = root / "lab", root / "keys"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RSILAB_KEY_DIR", str(key_dir))
        mp.setenv("RSILAB_SANDBOX", "process")
        mp.delenv("RSILAB_LAB", raising=False)
        made = rsilab("init", "--lab", path)
        assert made.exit_code == 0, explain(made)
        ran = rsilab("run", "synthetic", "--budget", "experiments=6", "--seed", "2", "--lab", path)
        assert ran.exit_code == 0, explain(ran)
        from rsilab.records import Campaign
        from rsilab.store import Lab

        with Lab.open(path) as opened:
            (campaign,) = opened.store.query_as(Campaign)
        yield CampaignLab(path=path, key_dir=key_dir, campaign_id=campaign.id)


@pytest.fixture
def lab_env(campaign_lab: CampaignLab, monkeypatch: pytest.MonkeyPatch) -> CampaignLab:
    """The module's lab, with its key folder in force for this test (the suite's autouse
    fixture gives every test a fresh one)."""
    monkeypatch.setenv("RSILAB_KEY_DIR", str(campaign_lab.key_dir))
    return campaign_lab


@pytest.fixture(scope="module")
def empty_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new SQLite tracking store, made (and migrated, ten seconds here) once per module."""
    from mlflow import MlflowClient

    path = tmp_path_factory.mktemp("mlflow") / "empty.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def tracking_uri(empty_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh SQLite tracking store's URI (a copy of the module's empty one); the test runs in
    its own folder, so nothing MLflow might write beside it lands in the repository."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    shutil.copyfile(empty_store, tmp_path / "mlflow.db")
    return f"sqlite:///{tmp_path / 'mlflow.db'}"
