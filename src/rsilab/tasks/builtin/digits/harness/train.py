"""Train the MLP on DATA/train.jsonl; write the weights as safetensors (never pickle)."""

import argparse
import json
from pathlib import Path

import torch
from common import build, features, read_jsonl
from optim import Optimizer
from safetensors.torch import load_file, save_file
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--model-in")
    parser.add_argument("--model-out", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--config", default="config.json")
    args = parser.parse_args()
    config = json.loads(Path(args.config).read_text())
    torch.manual_seed(args.seed)
    rows = read_jsonl(str(Path(args.data) / "train.jsonl"))
    x = features([row["input"] for row in rows])
    y = torch.tensor([int(row["target"]) for row in rows])
    model = build(config)
    if args.model_in:
        model.load_state_dict(load_file(args.model_in))
    optimizer = Optimizer(list(model.parameters()), config)
    loss_fn = nn.CrossEntropyLoss()
    batch = int(config["batch_size"])
    for _ in range(int(config["epochs"])):
        order = torch.randperm(len(x))
        for start in range(0, len(x), batch):
            index = order[start : start + batch]
            loss_fn(model(x[index]), y[index]).backward()
            optimizer.step()
    Path(args.model_out).parent.mkdir(parents=True, exist_ok=True)
    save_file(model.state_dict(), args.model_out, metadata={"config": json.dumps(config)})


if __name__ == "__main__":
    main()
