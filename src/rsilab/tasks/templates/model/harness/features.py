"""Features of a point, shared by train.py and predict.py."""

import math


def features(point: list[float], kind: str) -> list[float]:
    """A bias term, the coordinates and, for "quadratic", their squares and product."""
    x, y = point
    if kind == "quadratic":
        return [1.0, x, y, x * x, y * y, x * y]
    return [1.0, x, y]


def probability(weights: list[float], feats: list[float]) -> float:
    """The logistic of the weighted sum, kept inside (0, 1) for large sums."""
    z = sum(w * f for w, f in zip(weights, feats, strict=True))
    return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))
