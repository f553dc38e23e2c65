"""Read {"id", "input"} lines on stdin; write {"id", "output": label} lines on stdout."""

import argparse
import json
import sys

import torch
from common import build, features
from safetensors import safe_open
from safetensors.torch import load_file


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    with safe_open(args.model, framework="pt") as handle:
        config = json.loads(handle.metadata()["config"])
    model = build(config)
    model.load_state_dict(load_file(args.model))
    model.eval()
    items = [json.loads(line) for line in sys.stdin if line.strip()]
    if not items:
        return
    with torch.no_grad():
        labels = model(features([item["input"] for item in items])).argmax(dim=1).tolist()
    for item, label in zip(items, labels, strict=True):
        sys.stdout.write(json.dumps({"id": item["id"], "output": int(label)}) + "\n")


if __name__ == "__main__":
    main()
