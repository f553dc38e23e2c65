"""The function to make faster. The timing driver imports ``kernel`` from this file.

Contract: ``kernel(x)`` takes a 1-D float64 array and returns a float64 array of the same
length: the trailing moving average over ``WINDOW`` values (fewer at the start), i.e.
``out[i] = mean(x[max(0, i - WINDOW + 1) : i + 1])``. Results must match the reference to a
relative tolerance of 1e-7. numpy is available; keep the function's name and signature.
"""

import numpy as np

WINDOW = 16


def kernel(x: np.ndarray) -> np.ndarray:
    out = np.empty(len(x))
    for i in range(len(x)):
        lo = max(0, i - WINDOW + 1)
        total = 0.0
        for j in range(lo, i + 1):
            total += x[j]
        out[i] = total / (i + 1 - lo)
    return out
