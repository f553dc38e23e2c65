"""The base model builder: the tiny variant builds in seconds, to the same bytes each time."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from safetensors import safe_open

from rsilab.tasks.builtin.posttrain._base import build_base


def test_the_tiny_base_builds_to_a_stable_hash(tmp_path: Path) -> None:
    # its build time is a benchmark's to state, not a test's
    first = build_base(tmp_path / "a.safetensors", "tiny", log=lambda _: None)
    second = build_base(tmp_path / "b.safetensors", "tiny", log=lambda _: None)
    assert first == second, "the same corpus and seeds must give the same bytes"
    assert first == hashlib.sha256((tmp_path / "a.safetensors").read_bytes()).hexdigest()
    with safe_open(str(tmp_path / "a.safetensors"), framework="pt") as handle:
        meta = json.loads(handle.metadata()["lm"])
        names = set(handle.keys())
    config = meta["config"]
    assert (config["hidden_size"], config["num_hidden_layers"]) == (32, 1)
    assert config["vocab_size"] <= 320
    assert json.loads(meta["tokenizer"])["model"]["type"] == "BPE"
    assert "model.embed_tokens.weight" in names and "lm_head.weight" not in names
