"""External discovery tools: data sets available without the network.

The machine that runs rsilab may have no internet, so discovery covers what is already here:
the lab's data pool and data sets bundled inside installed packages (scikit-learn ships
several). Only names, sizes, descriptions and how to load them are listed: no file paths.

A bundled data set that the caller's task declares as a source of its data
(``Task.data_sources``, e.g. scikit-learn's ``digits.csv.gz`` for the built-in ``digits``
task) is never offered: loading it would hand the improver the items of the task's private
tiers. A file counts as the declared source when it is that file or holds the same bytes (a
copy in another environment). When the caller's task cannot be loaded, no bundled data set is
offered at all (its sources are unknown).
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from rsilab.errors import UserError
from rsilab.expos.context import ToolEnv
from rsilab.expos.registry import Category
from rsilab.expos.tools._base import tool
from rsilab.records import Dataset
from rsilab.tasks import load_ref

# Bundled scikit-learn data sets: name -> (data files, description file, loader).
_SKLEARN_BUNDLED: dict[str, tuple[tuple[str, ...], str, str]] = {
    "digits": (("digits.csv.gz",), "digits.rst", "sklearn.datasets.load_digits"),
    "iris": (("iris.csv",), "iris.rst", "sklearn.datasets.load_iris"),
    "wine": (("wine_data.csv",), "wine_data.rst", "sklearn.datasets.load_wine"),
    "breast_cancer": (
        ("breast_cancer.csv",),
        "breast_cancer.rst",
        "sklearn.datasets.load_breast_cancer",
    ),
    "diabetes": (
        ("diabetes_data_raw.csv.gz", "diabetes_target.csv.gz"),
        "diabetes.rst",
        "sklearn.datasets.load_diabetes",
    ),
    "linnerud": (
        ("linnerud_exercise.csv", "linnerud_physiological.csv"),
        "linnerud.rst",
        "sklearn.datasets.load_linnerud",
    ),
}


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)  # locate without importing the package
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _describe(descr: Path) -> str:
    """The first prose line of a dataset's .rst description."""
    try:
        lines = descr.read_text(encoding="utf-8").splitlines()
    except OSError:
        return ""
    for line in lines:
        text = line.strip()
        if text and not text.startswith((".. ", "**", "=", "-", ":")):
            return text[:200]
    return ""


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class _Declared:
    """A task's declared data sources, matched by path or by content."""

    def __init__(self, sources: Sequence[Path]) -> None:
        files = [p.resolve() for p in sources if p.is_file()]
        self._paths = set(files)
        self._sizes: dict[int, list[Path]] = {}
        for p in files:
            self._sizes.setdefault(p.stat().st_size, []).append(p)
        self._folders = [p.resolve() for p in sources if p.is_dir()]

    def holds(self, path: Path) -> bool:
        """Whether ``path`` is, lies in or has the bytes of a declared source."""
        real = path.resolve()
        if real in self._paths or any(real.is_relative_to(f) for f in self._folders):
            return True
        same_size = self._sizes.get(real.stat().st_size, [])
        return bool(same_size) and _digest(real) in {_digest(p) for p in same_size}


def packaged_datasets(declared: Sequence[Path] = ()) -> list[dict[str, Any]]:
    """Data sets bundled with installed packages, as listing entries; none whose files are
    (or hold the bytes of) one of the ``declared`` data sources."""
    root = _package_dir("sklearn")
    if root is None:
        return []
    sources = _Declared(declared)
    out = []
    for name, (files, descr, loader) in _SKLEARN_BUNDLED.items():
        paths = [root / "datasets" / "data" / f for f in files]
        if not all(p.is_file() for p in paths) or any(sources.holds(p) for p in paths):
            continue
        out.append(
            {
                "name": name,
                "source": "package:scikit-learn",
                "loader": loader,
                "size": sum(p.stat().st_size for p in paths),
                "description": _describe(root / "datasets" / "descr" / descr),
            }
        )
    return out


@tool(Category.DISCOVERY)
def search_local_datasets(
    env: ToolEnv, query: str = Field(default="", max_length=200)
) -> dict[str, Any]:
    """Find data sets available here without the network: the lab's pool and installed packages.

    Args:
        query: words to match in names and descriptions; empty lists everything.
    """
    words = query.lower().split()

    def matches(*texts: str) -> bool:
        blob = " ".join(texts).lower()
        return all(w in blob for w in words)

    found: list[dict[str, Any]] = [
        {"name": d.name, "source": f"lab:{d.id}", "description": d.readme.split("\n", 1)[0]}
        for d in env.readable_as(Dataset)
        if matches(d.name, d.readme, d.source)
    ]
    declared = _declared_sources(env)
    if declared is not None:
        found += [p for p in packaged_datasets(declared) if matches(p["name"], p["description"])]
    return {"datasets": found}


def _declared_sources(env: ToolEnv) -> list[Path] | None:
    """The data sources the caller's task declares; ``None`` when its task cannot be loaded
    (then no bundled data set is offered: fail closed)."""
    if env.call.campaign_id is None:
        return []
    campaign = env.campaign()
    try:
        return list(load_ref(campaign.task, campaign_id=campaign.id).data_sources)
    except UserError:
        return None
