"""The harness contract: manifests, command lines, stdin encoding and predict output checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rsilab.tasks import (
    HarnessOutputError,
    ManifestError,
    Sample,
    encode_inputs,
    get_task,
    load_manifest,
    parse_predictions,
    predict_argv,
    predict_spec,
    task_predict_spec,
    train_argv,
    train_spec,
)


def _manifest(folder: Path, text: str) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "harness.toml").write_text(text)
    return folder


def test_builtin_manifests_load() -> None:
    digits = load_manifest(get_task("digits").harness)
    assert digits.train == ["python", "train.py"] and digits.config == "config.json"
    assert digits.improve is None and not digits.improves
    kernel = load_manifest(get_task("kernel").harness)
    assert kernel.predict is None and kernel.model == "none"
    policy = load_manifest(get_task("policy").harness)
    assert policy.improve == ["python", "improve.py"] and policy.improves


def test_improve_is_an_optional_command(tmp_path: Path) -> None:
    text = '[harness]\npredict = "python p.py"\nimprove = "python improve.py --evaluations 8"\n'
    manifest = load_manifest(_manifest(tmp_path / "h", text))
    assert manifest.improve == ["python", "improve.py", "--evaluations", "8"]
    assert manifest.improves and predict_argv(manifest, seed=0) == ("python", "p.py", "--seed", "0")
    plain = load_manifest(_manifest(tmp_path / "plain", '[harness]\npredict = "python p.py"\n'))
    assert plain.improve is None and not plain.improves


def test_argv_follow_the_contract(tmp_path: Path) -> None:
    manifest = load_manifest(get_task("digits").harness)
    assert train_argv(manifest, data="d", model_out="m.safetensors", seed=7, model_in="p") == (
        "python",
        "train.py",
        "--data",
        "d",
        "--model-in",
        "p",
        "--model-out",
        "m.safetensors",
        "--seed",
        "7",
        "--config",
        "config.json",
    )
    assert predict_argv(manifest, seed=3, model="m") == (
        "python",
        "predict.py",
        "--model",
        "m",
        "--seed",
        "3",
    )
    spec = train_spec(manifest, tmp_path, data="d", model_out="m", seed=1, threads=2)
    assert spec.workspace == tmp_path and spec.threads == 2
    sample = Sample(id="a", input=[1, 2], target="secret-label")
    pspec = predict_spec(manifest, tmp_path, [sample], seed=1, model="m")
    assert pspec.stdin == b'{"id":"a","input":[1,2]}\n'


def test_inputs_never_carry_targets() -> None:
    encoded = encode_inputs([Sample(id="x", input="in", target="TARGET")])
    assert b"TARGET" not in encoded
    assert json.loads(encoded) == {"id": "x", "input": "in"}


def test_predict_only_harness_has_no_train(tmp_path: Path) -> None:
    manifest = load_manifest(_manifest(tmp_path / "h", '[harness]\npredict = "python p.py"\n'))
    assert not manifest.trains
    assert predict_argv(manifest, seed=0) == ("python", "p.py", "--seed", "0")
    with pytest.raises(ValueError, match="no train entry point"):
        train_argv(manifest, data="d", model_out="m", seed=0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, "cannot read"),
        ("[harness\n", "not valid TOML"),
        ('name = "x"\n', "needs a [harness] table"),
        ('[harness]\npredict = ""\n', "predict: Value error, command is empty"),
        ('[harness]\nimprove = ""\n', "improve: Value error, command is empty"),
        ('[harness]\nconfig = "../c.json"\n', "must be a path inside the harness"),
        ('[harness]\nmodel = "pickle"\n', "model: Input should be 'safetensors'"),
        ('[harness]\ntrian = "x"\n', "trian: Extra inputs are not permitted"),
    ],
)
def test_manifest_errors_are_explained(tmp_path: Path, text: str | None, expected: str) -> None:
    folder = tmp_path / "h"
    folder.mkdir()
    if text is not None:
        (folder / "harness.toml").write_text(text)
    with pytest.raises(ManifestError, match=expected.replace("[", r"\[")):
        load_manifest(folder)


def test_parse_predictions_accepts_the_contract() -> None:
    out = b'{"id": "a", "output": 1}\n\n{"id": "b", "output": [2]}\n'
    assert parse_predictions(out, ["a", "b"]) == {"a": 1, "b": [2]}


@pytest.mark.parametrize(
    ("stdout", "expected"),
    [
        (b"oops\n", "line 1: not JSON"),
        (b'{"id": "a"}\n', "line 1: expected an object with 'id' and 'output'"),
        (b'{"id": "b", "output": 1}\n{"id": "a", "output": 1}\n', "id 'b' where 'a' was expected"),
        (b'{"id": "a", "output": 1}\n', "1 outputs for 2 inputs"),
        (
            b'{"id": "a", "output": 1}\n{"id": "b", "output": 1}\n{"id": "c", "output": 1}\n',
            "line 3: more outputs than the 2 inputs",
        ),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_parse_predictions_names_the_fault(stdout: bytes, expected: str) -> None:
    with pytest.raises(HarnessOutputError, match=expected):
        parse_predictions(stdout, ["a", "b"])


def test_kernel_predict_runs_the_task_driver_not_the_harness(tmp_path: Path) -> None:
    task = get_task("kernel")
    spec = task_predict_spec(task, tmp_path, [Sample(id="n1", input={"n": 8, "seed": 1})], seed=5)
    assert spec.argv[:3] == ("python", "-I", "-c")
    assert "def reference" in spec.argv[3]
    assert spec.argv[4:] == ("--seed", "5")
    unknown = task.model_copy(update={"predict_driver": "nope"})
    with pytest.raises(KeyError, match="unknown predict driver 'nope'; known: kernel-timing"):
        task_predict_spec(unknown, tmp_path, [], seed=0)
