"""Classify texts, or embed them for retrieval, with a model trained by train.py.

    python predict.py [--model PATH] --seed N  < inputs.jsonl > outputs.jsonl

Each input line is ``{"id", "input"}``; one ``{"id", "output"}`` line comes out per input, in
order. An input ``{"text": str}`` gets its label; an input ``{"queries": [str], "documents":
[str]}`` gets ``{"queries": [[float]], "documents": [[float]]}``, the L2-normalised sentence
embeddings (scored by cosine similarity outside the harness). Without ``--model`` the base
encoder embeds and classification outputs are null.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import common
import torch

BATCH = 64
DECIMALS = 5


def is_text(data: Any) -> bool:
    """A classification input: ``{"text": str}``."""
    return isinstance(data, dict) and isinstance(data.get("text"), str)


def is_group(data: Any) -> bool:
    """A retrieval input: ``{"queries": [str], "documents": [str]}``."""
    return isinstance(data, dict) and isinstance(data.get("queries"), list)


def texts_of(data: Any) -> list[str]:
    """The texts one input asks about (classification: one; retrieval: queries + documents)."""
    if is_text(data):
        return [data["text"]]
    if is_group(data):
        return [str(t) for t in data["queries"]] + [str(t) for t in data.get("documents", [])]
    return []


@torch.no_grad()
def run(loaded: common.Loaded, texts: list[str], length: int, embed: bool) -> list[Any]:
    """Labels (``embed`` false) or rounded embeddings of ``texts``, in order."""
    model, tokenizer = loaded.model, loaded.tokenizer
    rows = [tokenizer.encode(text, length) for text in texts]
    results: list[Any] = [None] * len(rows)
    for batch in common.by_length(rows, BATCH):
        ids, mask = common.pad([rows[i] for i in batch], tokenizer.pad)
        out: list[Any]
        if embed:
            values = model.embed(ids, mask).tolist()
            out = [[round(v, DECIMALS) for v in vector] for vector in values]
        else:
            out = [model.labels[int(i)] for i in model(ids, mask).argmax(-1)]
        for i, value in zip(batch, out, strict=True):
            results[i] = value
    return results


def answer(data: Any, labels: dict[str, Any], vectors: dict[str, Any]) -> Any:
    """The output for one input (null for an input of neither kind)."""
    if is_text(data):
        return labels.get(data["text"])
    if is_group(data):
        queries = [vectors[str(t)] for t in data["queries"]]
        documents = [vectors[str(t)] for t in data.get("documents", [])]
        return {"queries": queries, "documents": documents}
    return None


def answer_all(loaded: common.Loaded, items: list[dict[str, Any]], trained: bool) -> list[Any]:
    """One output per item: texts are labelled and embedded in batches, each text once."""
    inputs = [item.get("input") for item in items]
    singles = sorted({t for d in inputs if is_text(d) for t in texts_of(d)})
    grouped = sorted({t for d in inputs if is_group(d) for t in texts_of(d)})
    meta = loaded.meta
    labels: dict[str, Any] = {}
    if trained and singles:
        found = run(loaded, singles, int(meta.get("max_length", 64)), embed=False)
        labels = dict(zip(singles, found, strict=True))
    embedded = run(loaded, grouped, int(meta.get("embed_max_length", 128)), embed=True)
    vectors = dict(zip(grouped, embedded, strict=True))
    return [answer(data, labels, vectors) for data in inputs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model")
    parser.add_argument("--seed", type=int, required=True)
    args = parser.parse_args()
    common.set_threads()
    torch.manual_seed(args.seed)
    items = [json.loads(line) for line in sys.stdin if line.strip()]
    loaded = common.load(Path(args.model) if args.model else None, [], "mean")
    loaded.model.eval()
    outputs = answer_all(loaded, items, trained=args.model is not None)
    for item, output in zip(items, outputs, strict=True):
        line = {"id": item.get("id"), "output": output}
        sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
