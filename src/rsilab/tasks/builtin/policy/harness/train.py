"""'Train' the policy: nothing to learn; the model is the config, written as JSON."""

import argparse
import json
from pathlib import Path

from policy import DEFAULTS


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--model-in")
    parser.add_argument("--model-out", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--config", default="config.json")
    args = parser.parse_args()
    config = json.loads(Path(args.config).read_text())
    unknown = sorted(set(config) - set(DEFAULTS))
    if unknown:
        raise SystemExit(f"config.json: unknown knob(s) {', '.join(unknown)}")
    Path(args.model_out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.model_out).write_text(json.dumps({"config": config}))


if __name__ == "__main__":
    main()
