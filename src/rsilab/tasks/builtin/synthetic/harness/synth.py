"""The synthetic system's ground truth: the expected score of every config and code variant.

Pure Python (stdlib only). ``true_score(config, variant, benchmark)`` is exact; a trained
"model" scores ``true_score + seed_noise(seed)``, and predict answers each sample's label
right with that probability, so a measured score carries training-seed noise and
finite-sample noise.
"""

import math
import random

NOISE_SD = 0.02
"""Standard deviation of the training-seed noise, in score units."""

VARIANTS = {
    "base": {"quality": 0.0, "robustness": 0.0},
    "warmup": {"quality": 0.03, "robustness": 0.0},
    "label_smoothing": {"quality": 0.015, "robustness": 0.02},
    "normalize_twice": {"quality": -0.04, "robustness": 0.02},
}
"""Code variants of train.py (its VARIANT constant) and their exact effect per benchmark."""

BENCHMARKS = ("quality", "robustness")


def _quality(config: dict) -> float:
    lr, width = float(config["lr"]), int(config["width"])
    score = 0.50
    score -= 0.06 * math.log10(lr / 3e-3) ** 2
    score += 0.04 * min(4.0, math.log2(max(width, 1) / 16))
    score -= 0.5 * (float(config["dropout"]) - 0.1) ** 2
    score += 0.12 * (1.0 - math.exp(-int(config["epochs"]) / 8))
    score += 0.03 if config["optimizer"] == "adam" else 0.0
    return score


def _robustness(config: dict) -> float:
    width = int(config["width"])
    score = 0.70 + 0.3 * (float(config["dropout"]) - 0.3)
    score -= 0.02 * max(0.0, math.log2(max(width, 1) / 64))
    score -= 0.03 * max(0.0, math.log10(float(config["lr"]) / 3e-2))
    return score


def true_score(config: dict, variant: str = "base", benchmark: str = "quality") -> float:
    """Expected score of ``config`` with code ``variant`` on ``benchmark``, in [0.03, 0.97]."""
    raw = _quality(config) if benchmark == "quality" else _robustness(config)
    return min(0.97, max(0.03, raw + VARIANTS[variant][benchmark]))


def seed_noise(seed: int, benchmark: str) -> float:
    """The training-seed noise of one trained model on one benchmark."""
    return random.Random(f"{seed}/{benchmark}").gauss(0.0, NOISE_SD)
