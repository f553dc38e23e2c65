"""A posttrain campaign end to end, on the tiny base: its jobs run in posttrain's own runtime
(in bubblewrap where it works), and the campaign records the runtime's base model by sha256,
stored in the lab's artifact store. Needs posttrain's runtime installed (`rsilab runtime
install --task posttrain`); skipped, saying so, where it is not."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

import rsilab
from rsilab.records import Campaign, CampaignState, Job, JobStatus
from rsilab.store import Lab
from rsilab.tasks import get_task
from tests.tasks.posttrain_tiny import build_tiny, tiny_task


@pytest.mark.timeout(1800)  # a baseline and two experiments of five benchmarks, 2 cores
def test_a_posttrain_campaign_runs_in_its_runtime_and_records_its_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = get_task("posttrain").runtime()
    if not runtime.is_installed():
        pytest.skip(
            "posttrain's runtime is not installed (rsilab runtime install --task posttrain)"
        )
    monkeypatch.setenv("RSILAB_KEY_DIR", str(tmp_path / "keys"))
    _, ref = tiny_task(tmp_path / "task", build_tiny(tmp_path / "tiny.safetensors"))
    result = rsilab.run(ref, budget="experiments=2", lab=tmp_path / "lab", seed=5)
    with Lab.open(tmp_path / "lab") as lab:
        campaign = lab.store.get_as(result.campaign_id, Campaign)
        jobs = lab.store.query_as(Job, campaign_id=campaign.id)
        stamp = runtime.stamp() or {}
        digests = {
            name: hashlib.sha256(Path(stamp["built"][name]).read_bytes()).hexdigest()
            for name in ("posttrain_base", "posttrain_corpus")
        }
        digest = digests["posttrain_base"]
        assert campaign.state is CampaignState.FINISHED, result.message
        assert campaign.settings["runtime"]["built"] == digests
        assert campaign.settings["runtime"]["path"] == str(runtime.path)
        assert lab.artifacts.has(digest), "the base model's bytes are in the artifact store"
        assert lab.artifacts.has(digests["posttrain_corpus"]), "and so are its corpus's"
        assert result.experiments == 2
        assert jobs and all(j.status is JobStatus.SUCCEEDED for j in jobs), [
            (j.id, j.status) for j in jobs
        ]
