"""A task's local model (``model`` in task.toml): checked and recorded by the campaign's
preflight; a resume refuses other bytes (Ray nodes: tests/executors/test_ray_runtime.py)."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import rsilab
from rsilab.expos.services import LabServices
from rsilab.orchestrator.campaign import CampaignPolicy, CampaignSession, Ending, run_policy
from rsilab.records import Campaign, CampaignState, EndReason
from rsilab.store import Lab
from rsilab.tasks import Budget, Task, get_task
from tests.sandbox.helpers import passable_folder


class _Pause(CampaignPolicy):
    """Stops at once, as a person would (so the campaign may be resumed)."""

    def settings(self) -> dict[str, object]:
        return {"agents": "pause"}

    def run(self, session: CampaignSession) -> Ending:
        return Ending(CampaignState.STOPPED, EndReason.STOPPED_BY_USER, "paused")


@pytest.fixture
def model() -> Iterator[Path]:
    """A model folder in a place every user can pass through (pytest's tmp is private)."""
    with passable_folder("rsilab-model-") as top:
        folder = top / "tiny"
        folder.mkdir(mode=0o755)
        (folder / "config.json").write_text('{"model_type": "llama"}')
        (folder / "model.safetensors").write_bytes(b"weights v1")
        for file in folder.iterdir():
            file.chmod(0o644)
        yield folder


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    opened = Lab.init(tmp_path / "lab")
    yield opened
    opened.close()


def _with(model: Path) -> Task:
    return get_task("synthetic").model_copy(update={"model": model})


def _digest(files: dict[str, bytes]) -> str:
    lines = "".join(
        f"{name}\0{len(data)}\0{hashlib.sha256(data).hexdigest()}\n"
        for name, data in sorted(files.items())
    )
    return hashlib.sha256(lines.encode()).hexdigest()


def test_the_campaign_records_the_models_digest_and_a_resume_refuses_other_bytes(
    lab: Lab, model: Path
) -> None:
    result = run_policy(lab, _with(model), _Pause(), budget=Budget(experiments=1))
    campaign = lab.store.get_as(result.campaign_id, Campaign)
    files = {"config.json": b'{"model_type": "llama"}', "model.safetensors": b"weights v1"}
    assert campaign.settings["model"] == {
        "path": str(model),
        "sha256": _digest(files),
        "files": 2,
        "bytes": 23 + 10,
    }
    (model / "model.safetensors").write_bytes(b"weights v2")
    head = lab.store.head()
    with pytest.raises(rsilab.UserError, match="started with") as refused:
        run_policy(
            lab, _with(model), _Pause(), budget=Budget(experiments=1), campaign_id=campaign.id
        )
    assert "restore the model it started with" in (refused.value.hint or "")
    assert lab.store.head() == head, "refused before anything was written"
    (model / "model.safetensors").write_bytes(b"weights v1")
    again = run_policy(
        lab, _with(model), _Pause(), budget=Budget(experiments=1), campaign_id=campaign.id
    )
    assert again.campaign_id == campaign.id
    with pytest.raises(rsilab.UserError, match="model is now none"):
        run_policy(
            lab,
            get_task("synthetic"),
            _Pause(),
            budget=Budget(experiments=1),
            campaign_id=campaign.id,
        )


def test_a_model_the_jobs_cannot_read_is_refused_before_anything_is_written(
    lab: Lab, model: Path
) -> None:
    (model / "model.safetensors").chmod(0o600)
    head = lab.store.head()
    with pytest.raises(rsilab.UserError, match="cannot be read by the jobs' user"):
        rsilab.run(_with(model), budget={"experiments": 1}, lab=lab)
    assert lab.store.head() == head and lab.store.query_as(Campaign) == []


def test_a_process_made_for_one_model_refuses_a_task_of_another(lab: Lab, model: Path) -> None:
    services = LabServices(lab)
    try:
        services.use_task(_with(model))
        assert services.executor is not None  # made now, showing the model
        services.use_task(_with(model))  # the same one again: fine
        services.use_task(get_task("synthetic"))  # no model: it just does not read it
        with pytest.raises(rsilab.UserError, match="do not see"):
            services.use_task(_with(model.parent))
    finally:
        services.close()


def test_a_model_folder_holding_the_lab_or_the_tasks_data_is_refused(
    tmp_path: Path, model: Path
) -> None:
    with Lab.init(model / "lab") as inside:  # the lab inside the model folder
        head = inside.store.head()
        with pytest.raises(rsilab.UserError, match=r"would show .*the lab or its keys"):
            rsilab.run(_with(model), budget={"experiments": 1}, lab=inside)
        assert inside.store.head() == head
    shutil.rmtree(model / "lab")
    (model / "raw.csv").write_text("private,rows\n")
    (model / "raw.csv").chmod(0o644)
    task = _with(model).model_copy(update={"data_sources": [model / "raw.csv"]})
    with Lab.init(tmp_path / "lab") as lab, pytest.raises(rsilab.UserError, match=r"raw\.csv"):
        rsilab.run(task, budget={"experiments": 1}, lab=lab)


def test_a_model_folder_holding_a_task_files_private_tiers_is_refused(tmp_path: Path) -> None:
    """The task's own folder as its model: it holds the split files, private tiers included."""
    from rsilab.tasks import load_task
    from tests.tasks.conftest import write_small_task

    toml = write_small_task(tmp_path / "parity")
    task = load_task(str(toml)).model_copy(update={"model": toml.parent})
    with Lab.init(tmp_path / "lab") as lab:
        head = lab.store.head()
        with pytest.raises(rsilab.UserError, match=r"would show the task's data file .*\.jsonl"):
            rsilab.run(task, budget={"experiments": 1}, lab=lab)
        assert lab.store.head() == head


def test_a_model_missing_from_the_host_is_refused_in_one_line(lab: Lab, tmp_path: Path) -> None:
    head = lab.store.head()
    with pytest.raises(rsilab.UserError, match="does not exist on this host"):
        rsilab.run(_with(tmp_path / "no-such-model"), budget={"experiments": 1}, lab=lab)
    assert lab.store.head() == head
