"""synthetic: the harness realises the known truth plus seed noise, in milliseconds."""

from __future__ import annotations

import json
import math
import shutil
import statistics
from collections import Counter
from pathlib import Path

from rsilab.records import DataTier
from rsilab.sandbox.base import Sandbox
from rsilab.tasks import get_task, make_splits, run_experiment
from rsilab.tasks.builtin import synthetic as synth


def test_scores_match_the_truth_within_noise(
    tmp_path: Path, sandbox: Sandbox, secret: bytes
) -> None:
    task = get_task("synthetic")
    workspace = tmp_path / "ws"
    shutil.copytree(task.harness, workspace)
    train = workspace / "train.py"
    train.write_text(train.read_text().replace('VARIANT = "base"', 'VARIANT = "warmup"'))
    outcome = run_experiment(task, sandbox, secret, seed=4, workspace=workspace)
    assert outcome.model is not None
    model = json.loads(outcome.model.read_text())
    config = task.default_config()
    module = synth._synth()
    for bench in ("quality", "robustness"):
        truth = synth.true_score(config, "warmup", bench)
        assert math.isclose(model["quality"][bench], truth + module.seed_noise(4, bench))
        n = len(outcome.samples[bench])
        sd = math.sqrt(synth.noise_sd() ** 2 + truth * (1 - truth) / n)
        assert abs(outcome.scores[bench] - truth) < 5 * sd


def test_true_effects_are_known() -> None:
    base = get_task("synthetic").default_config()
    truth = synth.true_score
    assert truth({**base, "lr": 3e-3}) > truth(base)
    assert math.isclose(truth({**base, "optimizer": "adam"}) - truth(base), 0.03)
    assert math.isclose(truth(base, "warmup") - truth(base), 0.03)
    wide = {**base, "width": 1024}
    assert truth(wide) > truth(base)
    assert truth(wide, benchmark="robustness") < truth(base, benchmark="robustness")
    assert set(synth.variants()) == {"base", "warmup", "label_smoothing", "normalize_twice"}


def test_seed_noise_has_the_stated_spread() -> None:
    noise = [synth._synth().seed_noise(seed, "quality") for seed in range(2000)]
    assert abs(statistics.fmean(noise)) < 0.003
    assert abs(statistics.stdev(noise) - synth.noise_sd()) < 0.003


def test_every_sample_carries_a_uniform_label_as_its_target(secret: bytes) -> None:
    task = get_task("synthetic")
    for bench in task.benchmarks:
        for tier, samples in make_splits(task, bench, secret).items():
            assert all(s.input["x"] == s.target for s in samples)  # type: ignore[call-overload, index]
            assert all(s.input["probe"] == bench.name for s in samples)  # type: ignore[call-overload, index]
            counts = Counter(s.target for s in samples)
            assert set(counts) == set(range(synth.LABELS)), tier
            assert max(counts.values()) < 0.2 * len(samples), tier


def test_a_constant_answer_scores_about_a_tenth(
    tmp_path: Path, sandbox: Sandbox, secret: bytes
) -> None:
    """The blind spot the hard-coding trap once had: a constant no longer matches the targets."""
    task = get_task("synthetic")
    workspace = tmp_path / "ws"
    shutil.copytree(task.harness, workspace)
    predict = workspace / "predict.py"
    body = predict.read_text()
    marker = '            sys.stdout.write(json.dumps({"id": item["id"], "output": answer})'
    assert marker in body
    predict.write_text(body.replace(marker, "            answer = 1\n" + marker))
    outcome = run_experiment(task, sandbox, secret, seed=1, workspace=workspace)
    splits = {b.name: make_splits(task, b, secret)[DataTier.DEV] for b in task.benchmarks}
    for bench, samples in splits.items():
        share = sum(1 for s in samples if s.target == 1) / len(samples)
        assert math.isclose(outcome.scores[bench], share)
        assert outcome.scores[bench] < 0.2 < synth.true_score(task.default_config(), "base", bench)
