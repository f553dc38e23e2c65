"""Score a model on a JSONL file with targets and print accuracy and retrieval MRR.

    python evaluate.py --model PATH --data FILE

A convenience for the workspace (e.g. on the dev file when the setting gives dev labels). It
is NOT the evaluator: rsilab scores predict's outputs itself, on data this workspace never
sees; editing this file changes nothing that counts.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from common import read_jsonl


def reciprocal_ranks(output: dict[str, Any], answers: list[int]) -> list[float]:
    """1/rank of each query's document by dot product (embeddings are unit length)."""
    documents = output["documents"]
    out = []
    for query, answer in zip(output["queries"], answers, strict=True):
        sims = [sum(a * b for a, b in zip(query, d, strict=True)) for d in documents]
        out.append(1.0 / sum(1 for s in sims if s >= sims[answer]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", required=True, help="a JSONL file of {id, input, target}")
    args = parser.parse_args()
    rows = read_jsonl(Path(args.data))
    stdin = "".join(json.dumps({"id": r["id"], "input": r["input"]}) + "\n" for r in rows)
    done = subprocess.run(
        [sys.executable, "predict.py", "--model", args.model, "--seed", "0"],
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
    )
    outputs = {o["id"]: o["output"] for o in map(json.loads, done.stdout.splitlines())}
    labelled = [r for r in rows if "text" in r["input"]]
    groups = [r for r in rows if "queries" in r["input"]]
    if labelled:
        correct = sum(outputs.get(r["id"]) == r["target"] for r in labelled)
        print(f"accuracy {correct / len(labelled):.4f} on {len(labelled)} texts")
    if groups:
        ranks = [x for r in groups for x in reciprocal_ranks(outputs[r["id"]], r["target"])]
        print(f"retrieval MRR {sum(ranks) / len(ranks):.4f} on {len(ranks)} queries")


if __name__ == "__main__":
    main()
