"""Print the mean quality this config reaches on a few freshly generated problems (a helper).

NOT the evaluator: rsilab re-generates each problem on the host and scores the config predict
chose there; editing this file, or printing a number, changes nothing that counts.
"""

import json
import random
import sys
from pathlib import Path

from predict import solve
from problems import BUDGETS, SEEN, make_problem, quality

if __name__ == "__main__":
    settings = json.loads(Path(sys.argv[1] if len(sys.argv) > 1 else "config.json").read_text())
    for family in SEEN:
        scores = []
        for seed in range(10):
            problem = make_problem(family, seed)
            chosen = solve(problem, settings, BUDGETS[seed % 3], random.Random(seed))
            scores.append(quality(problem, chosen))
        print(f"{family}: {sum(scores) / len(scores):.3f}")
