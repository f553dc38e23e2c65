"""``gpus`` in harness.toml: default 0, bounded, and carried into every job's spec."""

from __future__ import annotations

from pathlib import Path

import pytest

from rsilab.tasks import ManifestError, load_manifest, predict_spec, train_spec


def _manifest(folder: Path, extra: str) -> Path:
    (folder / "harness.toml").write_text(
        f'[harness]\ntrain = "python train.py"\npredict = "python predict.py"\n{extra}'
    )
    return folder


def test_gpus_default_to_zero(tmp_path: Path) -> None:
    manifest = load_manifest(_manifest(tmp_path, ""))
    assert manifest.gpus == 0
    assert train_spec(manifest, tmp_path, data="d", model_out="m", seed=1).gpus == 0


def test_gpus_reach_train_and_predict_jobs(tmp_path: Path) -> None:
    manifest = load_manifest(_manifest(tmp_path, "gpus = 2\n"))
    assert train_spec(manifest, tmp_path, data="d", model_out="m", seed=1).gpus == 2
    assert predict_spec(manifest, tmp_path, [], seed=1).gpus == 2
    assert train_spec(manifest, tmp_path, data="d", model_out="m", seed=1).gpu_devices == ()


@pytest.mark.parametrize("value", ["-1", "65", '"one"'])
def test_bad_gpus_are_refused_by_name(tmp_path: Path, value: str) -> None:
    with pytest.raises(ManifestError, match="gpus"):
        load_manifest(_manifest(tmp_path, f"gpus = {value}\n"))
