"""Shared by the policy tests: configs with known effects, and the harness's modules."""

from __future__ import annotations

import functools
import importlib.util
import sys
from types import ModuleType

from rsilab.tasks.builtin.policy import HERE

HARNESS = HERE / "harness"
SIBLINGS = ("policy", "problems", "predict")
"""Harness modules that import one another by bare name, as they do in the sandbox."""

BETTER = {
    "epsilon": 0.45,
    "patience": 16,
    "step": 0.2,
    "shrink": 0.45,
    "w_one": 0.9,
    "w_all": 0.15,
    "w_cross": 0.75,
    "confirm": 0,
}
"""Bolder: explores, takes real steps, shrinks them fast, crosses the two best. Found by a
random search over 150 configs refined by the policy itself; true quality (40 problems a
family, budgets 40/60/80) 0.57 on the seen families and 0.52 on the held-out ones, where the
starting config gets 0.41 and 0.42."""

BAD = {
    "epsilon": 0.0,
    "patience": 30,
    "step": 0.01,
    "shrink": 1.0,
    "w_one": 1.0,
    "w_all": 0.0,
    "w_cross": 0.0,
    "confirm": 0,
}
"""A crawl: no exploration, the smallest step, never shrinking; 0.12 seen, 0.22 held out."""


@functools.cache
def harness_module(name: str) -> ModuleType:
    """A module of the packaged policy harness, loaded with its folder first on the path (as
    in the sandbox), under a private name; the path and sys.modules are left as they were."""
    folder = str(HARNESS)
    saved = {n: sys.modules.pop(n) for n in SIBLINGS if n in sys.modules}
    sys.path.insert(0, folder)
    try:
        spec = importlib.util.spec_from_file_location(
            f"rsilab_policy_harness_{name}", HARNESS / f"{name}.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(folder)
        for sibling in SIBLINGS:
            sys.modules.pop(sibling, None)
        sys.modules.update(saved)
    return module
