"""Time kernel.py against a copy of the original loop on random inputs, and print the speedup.

A convenience for trying ideas in the workspace. It is NOT the evaluator: rsilab scores the
kernel with its own timing driver on private inputs; editing this file changes nothing that
counts.
"""

import statistics
import time

import numpy as np
from kernel import WINDOW, kernel


def _loop(x: np.ndarray) -> np.ndarray:
    out = np.empty(len(x))
    for i in range(len(x)):
        lo = max(0, i - WINDOW + 1)
        out[i] = sum(x[lo : i + 1]) / (i + 1 - lo)
    return out


def _time(fn, x: np.ndarray) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    fn(x)
    return time.perf_counter() - start


if __name__ == "__main__":
    for n in (512, 2048, 8192):
        x = np.random.default_rng(n).standard_normal(n)
        assert np.allclose(kernel(x), _loop(x)), f"wrong output at n={n}"
        ref = statistics.median(_time(_loop, x) for _ in range(3))
        cand = statistics.median(_time(kernel, x) for _ in range(3))
        print(f"n={n}: speedup {ref / cand:.2f}")
