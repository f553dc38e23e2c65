"""Generated numeric data the content guard's thresholds were set on (never a task's tiers).

``strokes``: 8x8 images, 0-16 integers, drawn from random stroke prototypes shifted by a pixel
and noised (digit-like, with rare-valued border pixels). ``writers``: the same with a
prototype per (class, writer), so that items have near twins across tiers, as handwriting
has. ``mixture``: correlated Gaussian mixtures with columns of wildly different scales.
``split``: which items are private.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]


def strokes(n: int = 900, classes: int = 10, seed: int = 0) -> Floats:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:8, 0:8]
    prototypes = []
    for _ in range(classes):
        image = np.zeros((8, 8))
        for _ in range(int(rng.integers(2, 5))):
            (x0, y0), (x1, y1) = rng.uniform(1, 6, (2, 2))
            for t in np.linspace(0, 1, 12):
                cx, cy = x0 + t * (x1 - x0), y0 + t * (y1 - y0)
                image += np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / 1.2)
        prototypes.append(image / image.max())
    out = []
    for _ in range(n):
        image = prototypes[int(rng.integers(classes))]
        dx, dy = rng.integers(-1, 2, 2)
        image = np.roll(np.roll(image, dx, 1), dy, 0)
        image = image * rng.uniform(0.7, 1.2) + rng.normal(0, 0.12, image.shape)
        out.append(np.clip(np.rint(image * 16), 0, 16).ravel())
    return np.array(out, dtype=np.float64)


def writers(n: int = 1800, styles: int = 400, seed: int = 0) -> Floats:
    rng = np.random.default_rng(seed)
    prototypes = strokes(styles, classes=styles, seed=seed) / 16
    out = []
    for _ in range(n):
        image = prototypes[int(rng.integers(styles))].reshape(8, 8)
        dx, dy = rng.integers(-1, 2, 2)
        image = np.roll(np.roll(image, dx, 1), dy, 0) * rng.uniform(0.85, 1.1)
        image = image + rng.normal(0, 0.08, (8, 8))
        out.append(np.clip(np.rint(image * 16), 0, 16).ravel())
    return np.array(out, dtype=np.float64)


def mixture(n: int = 900, width: int = 20, parts: int = 8, seed: int = 0) -> Floats:
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 3, (parts, width))
    mixing = rng.normal(0, 1, (width, width)) / np.sqrt(width)
    x = centres[rng.integers(parts, size=n)] + rng.normal(0, 1, (n, width)) @ mixing
    return np.asarray(x * rng.uniform(0.1, 50, width) + rng.uniform(-100, 100, width))


def split(n: int, seed: int = 1, share: float = 0.3) -> npt.NDArray[np.bool_]:
    mask = np.zeros(n, dtype=bool)
    mask[np.random.default_rng(seed).permutation(n)[: int(share * n)]] = True
    return mask
