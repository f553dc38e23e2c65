"""'Train' the synthetic system: write its per-benchmark quality as JSON (milliseconds)."""

import argparse
import json
from pathlib import Path

from synth import BENCHMARKS, seed_noise, true_score

VARIANT = "base"
"""The code variant this harness implements; see synth.VARIANTS for the others."""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--model-in")
    parser.add_argument("--model-out", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--config", default="config.json")
    args = parser.parse_args()
    config = json.loads(Path(args.config).read_text())
    quality = {
        name: min(1.0, max(0.0, true_score(config, VARIANT, name) + seed_noise(args.seed, name)))
        for name in BENCHMARKS
    }
    Path(args.model_out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.model_out).write_text(json.dumps({"quality": quality, "variant": VARIANT}))


if __name__ == "__main__":
    main()
