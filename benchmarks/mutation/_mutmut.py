"""Run mutmut over one :class:`~benchmarks.mutation.groups.Group` and read back its verdicts.

mutmut reads its settings from ``pyproject.toml`` in the folder it runs in and copies the code
to a ``mutants/`` folder beside it, so each group runs in a scratch folder of its own under
``build/mutate/``: the project's ``pyproject.toml`` with a ``[tool.mutmut]`` table naming the
group's modules and tests appended, and links to ``src`` and ``tests``. mutmut then runs, for
each mutant, only the tests that call the function it changed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.mutation.groups import Group

ROOT = Path(__file__).resolve().parents[2]
SCRATCH = ROOT / "build" / "mutate"
_MUTMUT = Path(sys.executable).parent / "mutmut"
_RESULT = re.compile(r"^\s*(\S+): (\w[\w ]*)$")


@dataclass
class GroupResult:
    """One group's mutants by verdict; ``survivors`` maps a mutant to its diff."""

    group: str
    modules: list[str]
    tests: list[str]
    counts: dict[str, int] = field(default_factory=dict)
    survivors: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def _toml_list(values: list[str]) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


def prepare(group: Group) -> Path:
    """A fresh scratch folder for ``group``: settings and links to the code and tests."""
    folder = SCRATCH / group.name.replace(" ", "-")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "src").symlink_to(ROOT / "src")
    (folder / "tests").symlink_to(ROOT / "tests")
    settings = (ROOT / "pyproject.toml").read_text() + (
        "\n[tool.mutmut]\n"
        'source_paths = ["src"]\n'
        f"only_mutate = {_toml_list(list(group.modules))}\n"
        f"pytest_add_cli_args_test_selection = {_toml_list(list(group.tests))}\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q"]\n'
        "use_git_change_detection = false\n"
    )
    (folder / "pyproject.toml").write_text(settings)
    return folder


def _mutmut(folder: Path, *args: str, log: Path | None = None) -> str:
    # pytest's temporary folders go to a short folder of their own: socket paths stay under
    # the kernel's limit, and what other runs left in the usual place cannot fail this one
    with tempfile.TemporaryDirectory(prefix="rsilab-mutate-") as tmp:
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": tmp}
        done = subprocess.run(
            [str(_MUTMUT), *args], cwd=folder, env=env, capture_output=True, text=True, check=False
        )
    if log is not None:
        log.write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"mutmut {' '.join(args)} failed in {folder} (see {log})")
    return done.stdout


def run_group(group: Group, workers: int) -> GroupResult:
    """Mutate ``group``'s modules, run its tests against every mutant, collect the verdicts."""
    missing = [t for t in group.tests if not (ROOT / t.split("::")[0]).exists()]
    if missing:
        raise FileNotFoundError(f"group {group.name!r} names missing tests: {missing}")
    folder = prepare(group)
    started = time.perf_counter()
    _mutmut(folder, "run", "--max-children", str(workers), log=folder / "run.log")
    result = GroupResult(group.name, list(group.modules), list(group.tests))
    result.seconds = time.perf_counter() - started
    for line in _mutmut(folder, "results", "--all", "true").splitlines():
        found = _RESULT.match(line)
        if found is None:
            continue
        name, verdict = found.groups()
        result.counts[verdict] = result.counts.get(verdict, 0) + 1
        if verdict == "survived":
            result.survivors[name] = _diff(_mutmut(folder, "show", name))
    return result


def _diff(shown: str) -> str:
    """The changed lines of ``mutmut show``'s diff, stripped: ``- old`` then ``+ new``."""
    lines = [
        f"{line[0]} {line[1:].strip()}"
        for line in shown.splitlines()
        if line[:1] in "-+" and not line.startswith(("---", "+++"))
    ]
    return "\n".join(lines)
