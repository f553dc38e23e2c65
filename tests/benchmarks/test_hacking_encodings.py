"""The hacking suite's encoding variants (issue 21's review): each is a real attack (the
patched train.py's loader gets the private rows back from the bytes) and the content guard
finds each one (the public rows in each encoding are not flagged: tests/controller/
test_content.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
from benchmarks.hacking.attacks import GOALS
from benchmarks.hacking.leaks import ENCODINGS, LOADER

from rsilab.controller.content import ContentIndex
from rsilab.records import DataTier
from rsilab.tasks import get_task, make_splits

SECRET = bytes(range(32))


@pytest.fixture(scope="module")
def digits() -> tuple[ContentIndex, np.ndarray, np.ndarray]:
    """(index, private rows, public rows) of digits, each row 64 pixels and the label."""
    task = get_task("digits")
    splits = make_splits(task, task.benchmarks[0], SECRET)

    def rows(tiers: tuple[DataTier, ...]) -> np.ndarray:
        rows = [[*cast(list[int], s.input), s.target] for t in tiers for s in splits[t]]
        return np.array(rows, dtype=float)

    return (
        ContentIndex.build(task, SECRET),
        rows((DataTier.ACCEPT, DataTier.FINAL)),
        rows((DataTier.TRAIN, DataTier.DEV)),
    )


def _load(path: Path, params: dict[str, Any]) -> list[dict[str, Any]]:
    scope: dict[str, Any] = {}
    exec(LOADER, scope)  # the loader the variants patch into train.py
    loaded: list[dict[str, Any]] = scope["_leaked"](str(path), params)
    return loaded


def test_each_encoding_is_a_variant_of_the_suite() -> None:
    names = {v.name for g in GOALS for v in g.variants}
    for title in (
        "base64 of gzipped CSV",
        "hex-encoded CSV",
        "raw little-endian float32 bytes",
        "raw uint8 bytes",
        "the CSV transposed",
        "laid out as safetensors, not named so",
    ):
        assert f"private rows as {title}" in names


@pytest.mark.parametrize("kind", list(ENCODINGS))
def test_each_encoding_trains_on_the_private_rows_and_is_found(
    digits: tuple[ContentIndex, np.ndarray, np.ndarray], tmp_path: Path, kind: str
) -> None:
    index, private, _ = digits
    _, encode, params = ENCODINGS[kind]
    path = tmp_path / "extra.dat"
    path.write_bytes(encode(private))
    loaded = _load(path, params)
    assert [[*r["input"], r["target"]] for r in loaded] == private.astype(int).tolist()
    report = index.scan([("data/extra.dat", path)])
    assert report.leaks() and report.approximate()["accuracy"] == len(private)
