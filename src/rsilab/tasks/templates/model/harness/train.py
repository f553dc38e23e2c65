"""train --data DIR --model-out PATH --seed N [--config FILE] [--model-in PATH]

Fits logistic regression by stochastic gradient descent on DIR/train.jsonl and writes the
weights and the feature kind as JSON. Knobs (config.json): features ("linear" or
"quadratic"), lr (step size) and epochs (passes over the data).
"""

import argparse
import json
import random
from pathlib import Path

from features import features, probability

parser = argparse.ArgumentParser()
parser.add_argument("--data", required=True)
parser.add_argument("--model-out", required=True)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--config", default=None)
parser.add_argument("--model-in", default=None)
args = parser.parse_args()

config = {"features": "linear", "lr": 0.1, "epochs": 5}
if args.config:
    config.update(json.loads(Path(args.config).read_text()))
lines = Path(args.data, "train.jsonl").read_text().splitlines()
samples = [json.loads(line) for line in lines if line.strip()]
rows = [(features(s["input"], config["features"]), s["target"]) for s in samples]

rng = random.Random(args.seed)
weights = [0.0] * len(rows[0][0])
for _ in range(int(config["epochs"])):
    rng.shuffle(rows)
    for feats, label in rows:
        error = probability(weights, feats) - label
        weights = [w - config["lr"] * error * f for w, f in zip(weights, feats, strict=True)]

out = Path(args.model_out)
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(json.dumps({"features": config["features"], "weights": weights}))
