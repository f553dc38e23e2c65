"""Answer each input: 1 (right) when its u falls under the model's quality, else 0."""

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
            answer = 1 if inp["u"] < quality[inp["probe"]] else 0
            sys.stdout.write(json.dumps({"id": item["id"], "output": answer}) + "\n")


if __name__ == "__main__":
    main()
