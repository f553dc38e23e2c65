"""The policy task's problems: task families that generate noisy objectives over small mixed
config spaces, and their exact truth.

Standard library only. ``make_problem(family, seed)`` is deterministic in its arguments: the
same file generates a problem inside the sandbox (predict) and on the host (the scorer loads
the pristine packaged copy). A problem is a JSON object: its knobs (float, int, choice), its
start config, the noise sd of one evaluation, and the family's parameters. ``value`` is the
noise-free objective (higher is better), ``optimum`` its exact maximum, ``quality`` the
normalised quality of a chosen config: 0 at the start, 1 at the optimum, clipped to [0, 1].
"""

import math
import random

SEEN = ("bowl", "ridge", "multimodal", "categorical", "noisy")
"""Families in every tier (train, dev, accept, final)."""
HELD_OUT = ("plateau", "mixed")
"""Families held out of train and dev: they appear only in the private tiers."""
FAMILIES = SEEN + HELD_OUT
BUDGETS = (40, 60, 80)
"""Evaluation budgets a sample may carry."""

_NOISE = {
    "bowl": 0.02,
    "ridge": 0.02,
    "multimodal": 0.02,
    "categorical": 0.02,
    "noisy": 0.5,
    "plateau": 0.02,
    "mixed": 0.25,
}
"""Noise sd of one evaluation, as a share of the gap between the start and the optimum."""
_CHOICES = ("a", "b", "c", "d")


def _uniform(rng, low, high):
    return low + (high - low) * rng.random()


def _point(rng, dims):
    return [_uniform(rng, 0.15, 0.85) for _ in range(dims)]


def _distance(a, b):
    return math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b, strict=True)))


def _far_point(rng, dims, others, distance):
    """A point at least ``distance`` from each of ``others`` (the last try if none is)."""
    for _ in range(200):
        point = _point(rng, dims)
        if all(_distance(point, o) >= distance for o in others):
            return point
    return point


def _near_point(rng, dims, centre, low, high, avoid, distance):
    """A point ``low`` to ``high`` from ``centre`` and at least ``distance`` from ``avoid``."""
    for _ in range(200):
        point = _point(rng, dims)
        gap = _distance(point, centre)
        if low <= gap <= high and _distance(point, avoid) >= distance:
            return point
    return point


def _rotation(rng, dims):
    """An orthonormal basis (rows), by Gram-Schmidt on uniform random vectors."""
    rows = []
    while len(rows) < dims:
        vector = [_uniform(rng, -1.0, 1.0) for _ in range(dims)]
        for row in rows:
            dot = sum(a * b for a, b in zip(vector, row, strict=True))
            vector = [a - dot * b for a, b in zip(vector, row, strict=True)]
        norm = math.sqrt(sum(a * a for a in vector))
        if norm > 1e-3:
            rows.append([a / norm for a in vector])
    return rows


def _float_knobs(rng, count):
    knobs = []
    for i in range(count):
        low = round(_uniform(rng, -5.0, 5.0), 2)
        width = round(_uniform(rng, 1.0, 10.0), 2)
        knobs.append({"name": f"x{i}", "type": "float", "low": low, "high": round(low + width, 2)})
    return knobs


def _shuffled(rng, items):
    items = list(items)
    for i in range(len(items) - 1, 0, -1):
        j = int(rng.random() * (i + 1))
        items[i], items[j] = items[j], items[i]
    return items


# --- the families: (rng) -> (knobs, start unit point, start choice, params) -----------------


def _bowl(rng, dims=6):
    centre = _point(rng, dims)
    start = _far_point(rng, dims, [centre], 0.45)
    return _float_knobs(rng, dims), start, None, {"centre": centre}


def _ridge(rng, dims=5):
    centre = _point(rng, dims)
    start = _far_point(rng, dims, [centre], 0.45)
    params = {
        "centre": centre,
        "rotation": _rotation(rng, dims),
        "scales": [1.0, 3.0, 9.0, 27.0, 81.0],
    }
    return _float_knobs(rng, dims), start, None, params


def _multimodal(rng, dims=3):
    peak = _point(rng, dims)
    decoy = _far_point(rng, dims, [peak], 0.5)
    start = _near_point(rng, dims, decoy, 0.2, 0.35, peak, 0.45)
    return _float_knobs(rng, dims), start, None, {"peak": peak, "decoy": decoy}


def _categorical(rng, dims=3):
    heights = _shuffled(rng, [1.0, 0.8, 0.6, 0.4])
    centres = [_point(rng, dims) for _ in _CHOICES]
    choice = _shuffled(rng, [i for i, h in enumerate(heights) if h < 1.0])[0]
    start = _far_point(rng, dims, [centres[choice]], 0.35)
    knobs = [
        *_float_knobs(rng, dims),
        {"name": "mode", "type": "choice", "choices": list(_CHOICES)},
    ]
    return knobs, start, choice, {"centres": centres, "heights": heights}


def _noisy(rng):
    return _bowl(rng, dims=4)


def _plateau(rng, dims=4):
    centre = _point(rng, dims)
    start = _far_point(rng, dims, [centre], 0.45)
    return _float_knobs(rng, dims), start, None, {"centre": centre}


def _mixed(rng):
    heights = _shuffled(rng, [1.0, 0.75, 0.5])
    centres = [[*_point(rng, 2), round(_uniform(rng, 3, 17)) / 20] for _ in heights]
    choice = _shuffled(rng, [i for i, h in enumerate(heights) if h < 1.0])[0]
    start = [*_point(rng, 2), round(_uniform(rng, 3, 17)) / 20]
    for _ in range(200):
        if _distance(start, centres[choice]) >= 0.35:
            break
        start = [*_point(rng, 2), round(_uniform(rng, 3, 17)) / 20]
    knobs = [
        *_float_knobs(rng, 2),
        {"name": "n0", "type": "int", "low": 0, "high": 20},
        {"name": "mode", "type": "choice", "choices": list(_CHOICES[:3])},
    ]
    params = {
        "centres": centres,
        "heights": heights,
        "rotation": _rotation(rng, 3),
        "scales": [1.0, 3.0, 9.0],
    }
    return knobs, start, choice, params


_MAKERS = {
    "bowl": _bowl,
    "ridge": _ridge,
    "multimodal": _multimodal,
    "categorical": _categorical,
    "noisy": _noisy,
    "plateau": _plateau,
    "mixed": _mixed,
}


# --- truth ----------------------------------------------------------------------------------


def _cone(unit, centre, rotation=None, scales=None):
    """Minus the (scaled, rotated) distance to ``centre``: 0 there, falling linearly."""
    diff = [u - c for u, c in zip(unit, centre, strict=True)]
    if rotation is None:
        return -math.sqrt(sum(d * d for d in diff))
    z = [sum(r * d for r, d in zip(row, diff, strict=True)) for row in rotation]
    return -math.sqrt(
        sum(s * v * v for s, v in zip(scales, z, strict=True)) / sum(scales) * len(scales)
    )


def _gauss(unit, centre, width):
    return math.exp(-(_distance(unit, centre) ** 2) / (2 * width * width))


def _family_value(family, params, unit, choice):
    if family in ("bowl", "noisy"):
        return _cone(unit, params["centre"])
    if family == "ridge":
        return _cone(unit, params["centre"], params["rotation"], params["scales"])
    if family == "multimodal":
        return max(_gauss(unit, params["peak"], 0.1), 0.7 * _gauss(unit, params["decoy"], 0.25))
    if family == "categorical":
        return params["heights"][choice] + 2.0 * _cone(unit, params["centres"][choice])
    if family == "plateau":
        gap = _distance(unit, params["centre"])
        return 0.1 * (1 - gap / math.sqrt(len(unit))) + 0.9 * max(0.0, 1 - gap / 0.3)
    centre = params["centres"][choice]  # mixed
    return params["heights"][choice] + _cone(unit, centre, params["rotation"], params["scales"])


_OPTIMUM = {"bowl": 0.0, "noisy": 0.0, "ridge": 0.0}


def optimum(problem):
    """The exact maximum of the problem's noise-free objective."""
    return _OPTIMUM.get(problem["family"], 1.0)


def _unit_of(knobs, config):
    """The config's point in the unit cube (numeric knobs) and its choice index (or None).

    Raises ValueError for a config that is not a dict, lacks a knob, or has a value of the
    wrong type or out of range."""
    if not isinstance(config, dict):
        raise ValueError("the chosen config is not an object")
    unit, choice = [], None
    for knob in knobs:
        name = knob["name"]
        if name not in config:
            raise ValueError(f"knob {name!r} is missing")
        value = config[name]
        if knob["type"] == "choice":
            if value not in knob["choices"]:
                raise ValueError(f"knob {name!r}: {value!r} is not one of {knob['choices']}")
            choice = knob["choices"].index(value)
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"knob {name!r}: {value!r} is not a number")
        if not math.isfinite(value) or not knob["low"] <= value <= knob["high"]:
            raise ValueError(f"knob {name!r}: {value!r} is outside [{knob['low']}, {knob['high']}]")
        if knob["type"] == "int" and float(value) != int(value):
            raise ValueError(f"knob {name!r}: {value!r} is not an integer")
        unit.append((value - knob["low"]) / (knob["high"] - knob["low"]))
    return unit, choice


def value(problem, config):
    """The noise-free objective at ``config`` (ValueError for an invalid config)."""
    unit, choice = _unit_of(problem["knobs"], config)
    return _family_value(problem["family"], problem["params"], unit, choice)


def noisy_value(problem, config, rng):
    """One noisy evaluation of ``config``: the truth plus gaussian noise of the problem's sd."""
    return value(problem, config) + rng.gauss(0.0, problem["noise"])


def quality(problem, config):
    """(value(config) - value(start)) / (optimum - value(start)), clipped to [0, 1]."""
    start = value(problem, problem["start"])
    gain = (value(problem, config) - start) / (optimum(problem) - start)
    return min(1.0, max(0.0, gain))


def _config(knobs, unit, choice):
    config, i = {}, 0
    for knob in knobs:
        if knob["type"] == "choice":
            config[knob["name"]] = knob["choices"][choice]
            continue
        raw = knob["low"] + unit[i] * (knob["high"] - knob["low"])
        config[knob["name"]] = round(raw) if knob["type"] == "int" else raw
        i += 1
    return config


def optimum_config(problem):
    """A config where the objective reaches its optimum (for tests and the scorer's checks)."""
    params, family = problem["params"], problem["family"]
    if family == "multimodal":
        return _config(problem["knobs"], params["peak"], None)
    if family in ("categorical", "mixed"):
        best = params["heights"].index(max(params["heights"]))
        return _config(problem["knobs"], params["centres"][best], best)
    return _config(problem["knobs"], params["centre"], None)


def make_problem(family, seed):
    """The problem of ``family`` drawn with ``seed`` (KeyError for an unknown family)."""
    maker = _MAKERS[family]
    rng = random.Random(f"policy/{family}/{int(seed)}")
    knobs, start_unit, start_choice, params = maker(rng)
    problem = {"family": family, "seed": int(seed), "knobs": knobs, "params": params}
    problem["start"] = _config(knobs, start_unit, start_choice)
    gap = optimum(problem) - value(problem, problem["start"])
    problem["noise"] = _NOISE[family] * gap
    return problem
