"""Run the policy on each input's problem and answer the config it finally chose.

An input is ``{"family", "seed", "budget"}``: the problem is generated from the family and
seed (problems.py), the policy (configured by the model) spends ``budget`` noisy evaluations
on it, and the output is its chosen config. The evaluation noise is drawn from ``--seed``.
"""

import argparse
import json
import random
import sys

from policy import Space, run
from problems import make_problem, noisy_value


def solve(problem, settings, budget, rng):
    """The config the policy chooses on ``problem`` after ``budget`` noisy evaluations."""
    space = Space(problem["knobs"])
    return run(
        space, problem["start"], settings, budget, rng, lambda c: noisy_value(problem, c, rng)
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with open(args.model, encoding="utf-8") as handle:
        settings = json.load(handle)["config"]
    for line in sys.stdin:
        if line.strip():
            item = json.loads(line)
            inp = item["input"]
            problem = make_problem(inp["family"], int(inp["seed"]))
            rng = random.Random(f"{args.seed}/{inp['family']}/{inp['seed']}")
            chosen = solve(problem, settings, int(inp["budget"]), rng)
            sys.stdout.write(json.dumps({"id": item["id"], "output": chosen}) + "\n")


if __name__ == "__main__":
    main()
