"""The base model builder: the tiny variant builds in seconds, to the same bytes each time."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from safetensors import safe_open

from rsilab.tasks.builtin.posttrain._base import build_base, install_base
from rsilab.tasks.builtin.posttrain._corpus import corpus


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


def test_the_install_writes_the_corpus_beside_the_base_and_stamps_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The harness replays the base's own training text: the install writes it where the
    harness looks by default (share/rsilab-posttrain/corpus.txt under the runtime), each file
    named with its sha256, so a campaign records and checks both."""
    monkeypatch.setenv("RSILAB_POSTTRAIN_BASE", "tiny")
    facts = install_base(tmp_path / "rt", log=lambda _: None)
    base = tmp_path / "rt" / "share" / "rsilab-posttrain" / "base.safetensors"
    text = tmp_path / "rt" / "share" / "rsilab-posttrain" / "corpus.txt"
    assert facts == {
        "posttrain_base": str(base),
        "posttrain_base_sha256": hashlib.sha256(base.read_bytes()).hexdigest(),
        "posttrain_corpus": str(text),
        "posttrain_corpus_sha256": hashlib.sha256(text.read_bytes()).hexdigest(),
    }
    documents = text.read_text().split("\n\n\n")
    assert documents == corpus("tiny").split("\n\n\n") and len(documents) > 10
