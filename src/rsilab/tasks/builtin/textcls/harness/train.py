"""Fine-tune all-MiniLM-L6-v2 to classify stdlib docstrings by module family.

    python train.py --data DIR [--model-in PATH] --model-out PATH --seed N [--config FILE]

Reads every ``train.jsonl`` in DIR (and its subfolders) and uses the samples whose input has a
``text``; the target is the label. Config keys (config.json holds the starting values):

- ``epochs``, ``batch_size``, ``max_length`` (tokens, [CLS] and [SEP] included);
- ``head_lr``: learning rate of the linear head;
- ``unfreeze_layers``: how many of the top encoder layers train (0: frozen encoder, a head on
  fixed embeddings; 6: every layer, and the position and type embeddings; the word-embedding
  table stays frozen); ``encoder_lr`` is their learning rate;
- ``pooling``: ``mean`` (the sentence-embedding rule) or ``cls``;
- ``weight_decay``, ``warmup`` (fraction of steps with a rising learning rate, then linear
  decay to zero), ``label_smoothing``;
- ``embed_max_length``: tokens per text when predict embeds text for retrieval.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

import common
import torch
from torch.nn import functional as F

DEFAULTS: dict[str, Any] = {
    "epochs": 1,
    "batch_size": 16,
    "max_length": 32,
    "head_lr": 1e-3,
    "unfreeze_layers": 0,
    "encoder_lr": 2e-5,
    "pooling": "mean",
    "weight_decay": 0.01,
    "warmup": 0.1,
    "label_smoothing": 0.0,
    "embed_max_length": 128,
}


def read_config(path: str | None) -> dict[str, Any]:
    """DEFAULTS updated by the config file; unknown keys are an error (typos fail loudly)."""
    config = dict(DEFAULTS)
    if path:
        given = json.loads(Path(path).read_text("utf-8"))
        unknown = sorted(set(given) - set(DEFAULTS))
        if unknown:
            sys.exit(f"unknown config keys: {', '.join(unknown)}; known: {', '.join(DEFAULTS)}")
        config.update(given)
    return config


def read_data(folder: Path) -> list[tuple[str, str]]:
    """(text, label) of every classification sample in the train files under ``folder``."""
    pairs: list[tuple[str, str]] = []
    for path in sorted(folder.rglob("train.jsonl")):
        for item in common.read_jsonl(path):
            data = item.get("input")
            if isinstance(data, dict) and isinstance(data.get("text"), str):
                pairs.append((data["text"], str(item["target"])))
    if not pairs:
        sys.exit(f"no classification samples (input.text) in {folder}/**/train.jsonl")
    return pairs


def unfreeze(model: torch.nn.Module, layers: int, total: int) -> int:
    """Mark the head and the top ``layers`` encoder layers trainable; returns grad_from."""
    layers = max(0, min(int(layers), total))
    grad_from = total - layers
    for name, param in model.named_parameters():
        if name.startswith("head."):
            param.requires_grad_(True)
        elif name.startswith("encoder.layer."):
            param.requires_grad_(int(name.split(".")[2]) >= grad_from)
        else:  # embeddings train only when every layer does; the 30522-row word table never
            # does (half the weights, a 45 MB model file, Adam over rows a batch never touches)
            param.requires_grad_(layers == total and "word_embeddings" not in name)
    return grad_from if layers < total else 0


def optimiser(model: torch.nn.Module, config: dict[str, Any]) -> torch.optim.AdamW:
    head = [p for n, p in model.named_parameters() if p.requires_grad and n.startswith("head.")]
    body = [p for n, p in model.named_parameters() if p.requires_grad and not n.startswith("head.")]
    groups = [{"params": head, "lr": float(config["head_lr"])}]
    if body:
        groups.append({"params": body, "lr": float(config["encoder_lr"])})
    return torch.optim.AdamW(groups, weight_decay=float(config["weight_decay"]))


def schedule(steps: int, warmup: float) -> Any:
    rise = max(1, int(steps * warmup))

    def factor(step: int) -> float:
        if step < rise:
            return (step + 1) / rise
        return max(0.0, (steps - step) / max(1, steps - rise))

    return factor


def train(
    loaded: common.Loaded, pairs: list[tuple[str, str]], config: dict[str, Any], seed: int
) -> None:
    model, tokenizer = loaded.model, loaded.tokenizer
    total = len(model.encoder.layer)
    grad_from = unfreeze(model, config["unfreeze_layers"], total)
    loaded.trained |= {n for n, p in model.named_parameters() if p.requires_grad}
    index = {label: i for i, label in enumerate(model.labels)}
    rows = [tokenizer.encode(text, int(config["max_length"])) for text, _ in pairs]
    targets = torch.tensor([index[label] for _, label in pairs])
    size = int(config["batch_size"])
    steps = int(config["epochs"]) * math.ceil(len(rows) / size)
    opt = optimiser(model, config)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule(steps, float(config["warmup"])))
    generator = torch.Generator().manual_seed(seed)
    model.train()
    for epoch in range(int(config["epochs"])):
        order = torch.randperm(len(rows), generator=generator).tolist()
        seen, loss_sum = 0, 0.0
        for start in range(0, len(order), size):
            batch = order[start : start + size]
            ids, mask = common.pad([rows[i] for i in batch], tokenizer.pad)
            logits = model(ids, mask, grad_from)
            loss = F.cross_entropy(
                logits, targets[batch], label_smoothing=float(config["label_smoothing"])
            )
            opt.zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]
            opt.step()
            sched.step()
            seen, loss_sum = seen + len(batch), loss_sum + loss.item() * len(batch)
        print(f"epoch {epoch + 1}: loss {loss_sum / max(seen, 1):.4f}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--model-in")
    parser.add_argument("--model-out", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--config")
    args = parser.parse_args()
    started = time.perf_counter()
    threads = common.set_threads()
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    config = read_config(args.config)
    pairs = read_data(Path(args.data))
    labels = sorted({label for _, label in pairs})
    model_in = Path(args.model_in) if args.model_in else None
    loaded = common.load(model_in, labels, str(config["pooling"]))
    train(loaded, pairs, config, args.seed)
    keep = {k: config[k] for k in ("max_length", "embed_max_length")}
    common.save(loaded, Path(args.model_out), keep)
    seconds = time.perf_counter() - started
    print(
        f"trained on {len(pairs)} samples in {seconds:.1f}s with {threads} threads", file=sys.stderr
    )


if __name__ == "__main__":
    main()
