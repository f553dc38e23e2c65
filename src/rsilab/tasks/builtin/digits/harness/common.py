"""What train.py and predict.py share: the network and the input encoding."""

import json

import torch
from torch import nn


def build(config: dict) -> nn.Module:
    """A one-hidden-layer MLP, 64 pixels in, 10 logits out."""
    hidden = int(config["hidden"])
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def features(inputs: list) -> torch.Tensor:
    """Pixel values 0-16 scaled to 0-1."""
    return torch.tensor(inputs, dtype=torch.float32) / 16.0


def read_jsonl(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
