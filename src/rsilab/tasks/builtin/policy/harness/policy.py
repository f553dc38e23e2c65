"""The research policy: a black-box search over a config space under an evaluation budget.

Standard library only: predict runs it on generated problems, improve.py runs the same policy
on a real system through the Experiment OS. Its behaviour is set by the knobs of
``config.json`` (see ``space.json`` for their ranges):

- ``epsilon``: share of proposals that explore (a uniform random config) rather than exploit
  around the incumbent (the best config trusted so far);
- ``w_one``, ``w_all``, ``w_cross``: weights of the exploiting operators: perturb one knob,
  perturb every knob, or cross the two best configs (a point on the line through them);
- ``step``: the initial step, a share of each knob's range (log range for log knobs);
- ``patience`` and ``shrink``: after ``patience`` proposals in a row that do not beat the
  incumbent the step is multiplied by ``shrink``; below ``MIN_STEP`` it restarts at ``step``;
- ``confirm``: re-evaluations a config that looks better must survive (its mean over them
  must still beat the incumbent) before it is trusted, against noisy evaluations.

A search asks for configs and is told their (noisy) values, higher being better; ``best`` is
the incumbent, which is what a run returns.
"""

import math

DEFAULTS = {
    "epsilon": 0.2,
    "patience": 10,
    "step": 0.03,
    "shrink": 0.9,
    "w_one": 1.0,
    "w_all": 0.0,
    "w_cross": 0.0,
    "confirm": 0,
}
"""The starting config.json; a knob a config leaves out takes its value here."""
MIN_STEP = 0.01
"""The smallest step; a step shrunk below it restarts at the initial step."""
_RETRIES = 8
"""Proposals drawn again when one repeats the incumbent exactly."""


def _clip(value, low, high):
    return min(high, max(low, value))


def _reflect(u):
    """``u`` folded back into [0, 1] at the edges."""
    u = abs(u) % 2.0
    return 2.0 - u if u > 1.0 else u


class Space:
    """Knobs of a config (``{"name", "type": float|int|choice|bool, "low", "high", "log",
    "choices"}``) mapped to a point: a unit coordinate per numeric knob, an index per choice.
    Keys of the start config that are not knobs stay as they are."""

    def __init__(self, knobs, fixed=None):
        self.knobs = [self._normal(k) for k in knobs]
        self.fixed = {k: v for k, v in (fixed or {}).items()}
        self.numeric = [i for i, k in enumerate(self.knobs) if k["type"] != "choice"]
        self.choices = [i for i, k in enumerate(self.knobs) if k["type"] == "choice"]

    @staticmethod
    def _normal(knob):
        knob = dict(knob)
        if knob["type"] == "bool":
            knob.update(type="choice", choices=[False, True])
        if knob["type"] != "choice":
            knob["low"], knob["high"] = float(knob["low"]), float(knob["high"])
            knob["log"] = bool(knob.get("log")) and knob["low"] > 0
        return knob

    def _to_unit(self, knob, value):
        low, high = knob["low"], knob["high"]
        if knob["log"]:
            low, high, value = math.log(low), math.log(high), math.log(max(value, knob["low"]))
        return _clip((float(value) - low) / (high - low), 0.0, 1.0)

    def _from_unit(self, knob, u):
        low, high = knob["low"], knob["high"]
        if knob["log"]:
            raw = math.exp(math.log(low) + u * (math.log(high) - math.log(low)))
        else:
            raw = low + u * (high - low)
        if knob["type"] == "int":
            return int(_clip(round(raw), math.ceil(low), math.floor(high)))
        return _clip(float(f"{raw:.6g}"), low, high)

    def encode(self, config):
        """The point of ``config`` (a missing or unknown value: the low end, the first choice)."""
        point = []
        for knob in self.knobs:
            value = config.get(knob["name"])
            if knob["type"] == "choice":
                point.append(knob["choices"].index(value) if value in knob["choices"] else 0)
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                point.append(self._to_unit(knob, value))
            else:
                point.append(0.0)
        return point

    def decode(self, point):
        """The config at ``point``: the fixed keys, then every knob's value."""
        config = dict(self.fixed)
        for knob, x in zip(self.knobs, point, strict=True):
            if knob["type"] == "choice":
                config[knob["name"]] = knob["choices"][int(x)]
            else:
                config[knob["name"]] = self._from_unit(knob, x)
        return config

    def key(self, config):
        """What identifies a config: its knob values (ints and choices are discrete)."""
        return tuple(repr(config.get(k["name"])) for k in self.knobs)

    def random(self, rng):
        point = []
        for knob in self.knobs:
            if knob["type"] == "choice":
                point.append(int(rng.random() * len(knob["choices"])))
            else:
                point.append(rng.random())
        return point

    def _other_choice(self, i, current, rng):
        count = len(self.knobs[i]["choices"])
        return current if count < 2 else (current + 1 + int(rng.random() * (count - 1))) % count

    def perturb_one(self, point, step, rng):
        """Move one knob: a gaussian step for a number, another value for a choice."""
        point = list(point)
        i = int(rng.random() * len(point))
        if i in self.choices:
            point[i] = self._other_choice(i, point[i], rng)
        else:
            point[i] = _reflect(point[i] + rng.gauss(0.0, step))
        return point

    def perturb_all(self, point, step, rng):
        """Move every number (each by step / sqrt(count)); switch each choice with 1/knobs."""
        point = list(point)
        scale = step / math.sqrt(max(1, len(self.numeric)))
        for i in self.numeric:
            point[i] = _reflect(point[i] + rng.gauss(0.0, scale))
        for i in self.choices:
            if rng.random() < 1.0 / len(self.knobs):
                point[i] = self._other_choice(i, point[i], rng)
        return point

    def cross(self, first, second, rng):
        """A point on the line through two points (numbers), each choice from either."""
        t = -0.25 + 1.5 * rng.random()
        point = []
        for i, (a, b) in enumerate(zip(first, second, strict=True)):
            if i in self.choices:
                point.append(a if rng.random() < 0.5 else b)
            else:
                point.append(_reflect(a + t * (b - a)))
        return point


class _Record:
    def __init__(self, point):
        self.point, self.total, self.count = point, 0.0, 0

    @property
    def mean(self):
        return self.total / self.count if self.count else -math.inf


class Search:
    """An ask/tell search from ``start`` (evaluated first, 1 + confirm times)."""

    def __init__(self, space, start, settings, rng):
        knobs = {**DEFAULTS, **(settings or {})}
        self.space, self.rng = space, rng
        self.epsilon = _clip(float(knobs["epsilon"]), 0.0, 1.0)
        self.patience = max(1, int(knobs["patience"]))
        self.step0 = _clip(float(knobs["step"]), MIN_STEP, 1.0)
        self.shrink = _clip(float(knobs["shrink"]), 0.05, 1.0)
        weights = [max(0.0, float(knobs[k])) for k in ("w_one", "w_all", "w_cross")]
        self.weights = weights if sum(weights) > 0 else [1.0, 0.0, 0.0]
        self.confirm = max(0, int(knobs["confirm"]))
        self.step, self.failures = self.step0, 0
        self.records = {}
        self.confirming = {}
        origin = space.encode(start)
        self.pending = [origin] * (1 + self.confirm)
        self.incumbent = None

    def ask(self):
        """The next config to evaluate."""
        if self.pending:
            return self.space.decode(self.pending.pop(0))
        return self._propose()

    def tell(self, config, value):
        """Record one evaluation of ``config`` (a config ``ask`` gave)."""
        key = self.space.key(config)
        record = self.records.get(key)
        if record is None:
            record = self.records[key] = _Record(self.space.encode(config))
        record.total += value
        record.count += 1
        if self.incumbent is None:
            self.incumbent = key
        if key == self.incumbent:
            return
        if key in self.confirming:
            if record.count >= self.confirming[key]:
                del self.confirming[key]
                self._decide(key)
            return
        if self.confirm and record.mean > self.records[self.incumbent].mean:
            self.confirming[key] = record.count + self.confirm
            self.pending.extend([record.point] * self.confirm)
            return
        self._decide(key)

    @property
    def best(self):
        """The incumbent config (the start until something beats it)."""
        if self.incumbent is None:
            return self.space.decode(self.space.encode(self.space.fixed))
        return self.space.decode(self.records[self.incumbent].point)

    def _decide(self, key):
        if self.records[key].mean > self.records[self.incumbent].mean:
            self.incumbent, self.failures = key, 0
            return
        self.failures += 1
        if self.failures >= self.patience:
            self.failures = 0
            self.step *= self.shrink
            if self.step < MIN_STEP:
                self.step = self.step0

    def _trusted(self):
        keys = [k for k in self.records if k not in self.confirming]
        return sorted(keys, key=lambda k: self.records[k].mean, reverse=True)

    def _propose(self):
        incumbent = self.records[self.incumbent].point
        for _ in range(_RETRIES):
            config = self.space.decode(self._draw(incumbent))
            if self.space.key(config) != self.incumbent:
                return config
        return config

    def _draw(self, incumbent):
        rng = self.rng
        if rng.random() < self.epsilon:
            return self.space.random(rng)
        pick = rng.random() * sum(self.weights)
        if pick < self.weights[0]:
            return self.space.perturb_one(incumbent, self.step, rng)
        if pick < self.weights[0] + self.weights[1]:
            return self.space.perturb_all(incumbent, self.step, rng)
        trusted = self._trusted()
        if len(trusted) < 2:
            return self.space.perturb_one(incumbent, self.step, rng)
        first, second = (self.records[k].point for k in trusted[:2])
        return self.space.cross(first, second, rng)


def run(space, start, settings, budget, rng, objective):
    """Search for ``budget`` evaluations of ``objective(config) -> float``; the best config."""
    search = Search(space, start, settings, rng)
    for _ in range(budget):
        config = search.ask()
        search.tell(config, objective(config))
    return search.best
