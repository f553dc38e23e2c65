"""Score a model on a JSONL file with labels and print the accuracy.

A convenience for the workspace (e.g. on DATA/dev.jsonl when the setting gives dev labels).
It is NOT the evaluator: rsilab scores predict's outputs itself, on data this workspace never
sees; editing this file changes nothing that counts.
"""

import argparse
import json
import subprocess
import sys

from common import read_jsonl


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", required=True, help="a JSONL file of {id, input, target}")
    args = parser.parse_args()
    rows = read_jsonl(args.data)
    stdin = "".join(json.dumps({"id": r["id"], "input": r["input"]}) + "\n" for r in rows)
    done = subprocess.run(
        [sys.executable, "predict.py", "--model", args.model],
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
    )
    outputs = {o["id"]: o["output"] for o in map(json.loads, done.stdout.splitlines())}
    correct = sum(outputs.get(r["id"]) == r["target"] for r in rows)
    print(f"accuracy {correct / max(len(rows), 1):.4f} on {len(rows)} samples")


if __name__ == "__main__":
    main()
