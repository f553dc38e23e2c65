"""Built files of a task's runtime: listed from the stamp, checked by sha256, and copied from
another install (a Ray head's) instead of built again."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from rsilab.sandbox.runtime_built import BuiltFileChanged, copy_built
from tests.cli.helpers import rsilab

BYTES = b"the head's base model"
DIGEST = hashlib.sha256(BYTES).hexdigest()


def _head_copy(tmp_path: Path, runtime: Path, payload: bytes = BYTES, key: str = "k1") -> Path:
    """A copy of a head's runtime stamp and built file, as a person would carry it over."""
    copy = tmp_path / "from-head"
    (copy / "share").mkdir(parents=True)
    (copy / "share" / "base.bin").write_bytes(payload)
    built = {"base": str(runtime / "share" / "base.bin"), "base_sha256": DIGEST}
    stamp = copy / ".rsilab-runtime.json"
    stamp.write_text(json.dumps({"key": key, "built": built}))
    return stamp


def test_the_heads_bytes_are_copied_not_built(tmp_path: Path) -> None:
    runtime = tmp_path / "rt"
    facts = copy_built(_head_copy(tmp_path, runtime), "k1", runtime, log=lambda _: None)
    assert (runtime / "share" / "base.bin").read_bytes() == BYTES
    assert facts == {"base": str(runtime / "share" / "base.bin"), "base_sha256": DIGEST}


def test_other_bytes_than_the_stamp_names_are_refused(tmp_path: Path) -> None:
    runtime = tmp_path / "rt"
    stamp = _head_copy(tmp_path, runtime, payload=b"rebuilt on this node")
    with pytest.raises(BuiltFileChanged, match="is not the file the stamp names"):
        copy_built(stamp, "k1", runtime, log=lambda _: None)
    assert not (runtime / "share" / "base.bin").exists()


def test_a_stamp_of_another_runtime_is_refused(tmp_path: Path) -> None:
    runtime = tmp_path / "rt"
    with pytest.raises(BuiltFileChanged, match="stamp of another runtime"):
        copy_built(_head_copy(tmp_path, runtime, key="k2"), "k1", runtime, log=lambda _: None)


def test_a_runtime_at_another_path_than_the_heads_is_refused(tmp_path: Path) -> None:
    stamp = _head_copy(tmp_path, tmp_path / "head-runtime")
    with pytest.raises(BuiltFileChanged, match="outside this runtime"):
        copy_built(stamp, "k1", tmp_path / "rt", log=lambda _: None)


def test_built_from_needs_a_task_with_a_build_step(tmp_path: Path) -> None:
    result = rsilab("runtime", "install", "--built-from", tmp_path / "stamp.json")
    assert result.exit_code != 0
    assert "--built-from needs --task naming a task with a build step" in result.stderr
