"""Answer each input: its label x (right) when its u falls under the model's quality, else
the next digit (wrong), so accuracy equals the quality in expectation."""

import argparse
import json
import sys


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with open(args.model, encoding="utf-8") as handle:
        quality = json.load(handle)["quality"]
    for line in sys.stdin:
        if line.strip():
            item = json.loads(line)
            inp = item["input"]
            label = int(inp["x"])
            answer = label if inp["u"] < quality[inp["probe"]] else (label + 1) % 10
            sys.stdout.write(json.dumps({"id": item["id"], "output": answer}) + "\n")


if __name__ == "__main__":
    main()
