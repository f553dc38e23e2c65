"""predict --model PATH --seed N  < inputs.jsonl > outputs.jsonl

Reads one {"id", "input"} object a line and writes one {"id", "output"} line per input, in
order: output 1 when the model puts the point inside the circle, else 0.
"""

import argparse
import json
import sys
from pathlib import Path

from features import features, probability

parser = argparse.ArgumentParser()
parser.add_argument("--model", required=True)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

model = json.loads(Path(args.model).read_text())
for line in sys.stdin:
    if not line.strip():
        continue
    item = json.loads(line)
    p = probability(model["weights"], features(item["input"], model["features"]))
    print(json.dumps({"id": item["id"], "output": 1 if p >= 0.5 else 0}))
