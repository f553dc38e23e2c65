"""``rsilab runtime adopt PYTHON``: an existing interpreter as the runtime, with no network.

A GPU machine comes with its own Python and a CUDA torch, and no network to install the pinned
CPU build. Adopting it makes the runtime from that interpreter instead of pip:

1. **Check.** ``PYTHON`` is asked (one subprocess) for its version, its prefixes, and the
   version of every requirement of the runtime (the shipped lines, plus a task's own with
   ``--task``), each also imported. Acceptable: the same Python ``major.minor`` as rsilab's (the
   sandbox shows jobs a stripped standard library compiled by rsilab's interpreter); **torch:
   any 2.x build**, CUDA or CPU (its local tag, e.g. ``+cu121``, is allowed: the harnesses use
   only torch's stable API); **every other line as written** (``==`` exactly, ignoring a local
   tag; ``>=`` as a lower bound), because the harnesses are tested against those versions and
   ``transformers`` and ``peft`` change their APIs between minor versions. Anything else
   refuses, in one line naming what is missing or at which version.
2. **Make.** The runtime folder (the same keyed path ``rsilab runtime install`` uses, so the
   sandbox finds it) becomes a venv of ``PYTHON``'s base interpreter whose site-packages holds
   hard links (copies across filesystems) of ``PYTHON``'s site-packages entries, rsilab's own
   left out: the sandbox masks a base Python's site-packages and shows only the runtime folder,
   so links are what lets jobs import the adopted packages without a copy of torch. The
   offline ``.pth``, the stripped standard library and the read permissions follow, as for an
   install; the folder is then checked to import every requirement and not rsilab.
3. **Build.** A task's build step (posttrain: its base model) runs in a subprocess of the new
   runtime's interpreter (its torch, its ``transformers``), with rsilab's own packages placed
   after the runtime's on ``sys.path`` so that the step's code loads.
4. **Stamp**, written last, as for an install, plus ``adopted`` (the interpreter) and
   ``accepted`` (each requirement's version found).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rsilab.errors import UserError
from rsilab.sandbox.runtime import (
    STAMP_NAME,
    STDLIB_FORMAT,
    Runtime,
    _locked,
    _make_readable,
    _write_offline,
    build_stdlib,
    check_task_requirements,
    full_requirements_text,
    requirement_lines,
    runtime_key,
    runtime_path,
)

Build = Callable[[Path, Callable[[str], None]], dict[str, str]]

PROBE = r"""
import importlib, importlib.metadata as md, json, re, sys, sysconfig
names = json.loads(sys.argv[1])
norm = lambda n: re.sub(r"[-_.]+", "_", n).lower()
modules = {}
for module, dists in md.packages_distributions().items():
    for dist in dists:
        modules.setdefault(norm(dist), []).append(module)
found = {}
for name in names:
    try:
        version = md.version(name)
    except md.PackageNotFoundError:
        found[name] = {"version": None, "error": "not installed"}
        continue
    tops = sorted(modules.get(norm(name), []), key=lambda m: (norm(m) != norm(name), m))
    tops = [m for m in tops if not m.startswith("_")] or tops
    error = ""
    try:
        importlib.import_module(tops[0]) if tops else None
    except BaseException as exc:
        error = f"import {tops[0]}: {type(exc).__name__}: {exc}".splitlines()[0]
    found[name] = {"version": version, "error": error}
try:
    import rsilab
    has_rsilab = True
except ImportError:
    has_rsilab = False
sites = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
print(json.dumps({
    "version": list(sys.version_info[:2]),
    "base_prefix": sys.base_prefix,
    "base_executable": getattr(sys, "_base_executable", sys.executable),
    "sites": sites,
    "found": found,
    "rsilab": has_rsilab,
}))
"""
"""Run by the interpreter being adopted: prints what :func:`check_probe` judges, as JSON."""

BUILD_RUNNER = r"""
import importlib, json, sys
from pathlib import Path
module, name, folder, extra = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
sys.path.extend(extra)  # after the runtime's own: its torch and transformers come first
build = getattr(importlib.import_module(module), name)
facts = build(Path(folder), lambda line: print(line, file=sys.stderr, flush=True))
print(json.dumps(facts))
"""
"""Runs a build step ``module:name`` in the runtime's interpreter; the facts on stdout."""

_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(==|>=)\s*([A-Za-z0-9.+!]+)$")
_SKIPPED = re.compile(r"^(rsilab([-_].*)?|_?_?editable__.*rsilab.*|rsilab_offline\.pth)$", re.I)
"""Site-packages entries never linked into an adopted runtime: rsilab itself stays out."""


class AdoptRefused(UserError):
    """The interpreter cannot be adopted as the runtime (the message says what it lacks)."""


def _release(version: str) -> tuple[int, ...]:
    """The leading numeric release of a version (``2.5.1+cu121`` -> ``(2, 5, 1)``)."""
    parts = []
    for part in version.split("+")[0].split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        parts.append(int(digits.group()))
    return tuple(parts)


def acceptable(line: str, found: str) -> bool:
    """Whether version ``found`` satisfies requirement ``line`` as adoption reads it (see the
    module): torch any 2.x; ``==`` exactly (a local tag ignored); ``>=`` as a lower bound."""
    match = _LINE.match(line)
    if match is None:
        return False
    name, op, wanted = match.groups()
    if name.lower() == "torch":
        return _release(found)[:1] == (2,)
    if op == "==":
        return found.split("+")[0] == wanted.split("+")[0]
    return _release(found) >= _release(wanted)


def check_probe(probe: dict[str, Any], lines: Sequence[str]) -> list[str]:
    """What makes the probed interpreter unacceptable, one phrase each (empty: acceptable)."""
    problems = []
    ours = list(sys.version_info[:2])
    if probe["version"] != ours:
        have = ".".join(map(str, probe["version"]))
        problems.append(f"it is Python {have}, rsilab runs {'.'.join(map(str, ours))}")
    for line in lines:
        match = _LINE.match(line)
        if match is None:
            problems.append(f"{line!r} cannot be checked (only == and >= lines can)")
            continue
        said = probe["found"].get(match.group(1), {"version": None, "error": "not asked"})
        if said["version"] is None:
            problems.append(f"{match.group(1)} is missing (needs {line})")
        elif not acceptable(line, said["version"]):
            wanted = "any 2.x" if match.group(1).lower() == "torch" else line
            problems.append(f"{match.group(1)} is {said['version']} (needs {wanted})")
        elif said["error"]:
            problems.append(f"{match.group(1)} does not import ({said['error']})")
    return problems


def probe(python: Path, names: Sequence[str]) -> dict[str, Any]:
    """What ``python`` says about itself and ``names`` (see :data:`PROBE`).

    Raises:
        AdoptRefused: it does not run, or says nothing readable.
    """
    try:
        done = subprocess.run(
            [str(python), "-I", "-c", PROBE, json.dumps(list(names))],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise AdoptRefused(f"{python} cannot be run: {exc}", "name a Python interpreter") from exc
    try:
        said: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        tail = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise AdoptRefused(
            f"{python} did not answer the probe: {tail}", "name a Python interpreter"
        ) from None
    missing = _unanswered(said)
    if missing:
        raise AdoptRefused(
            f"{python} did not answer the probe: its answer lacks {', '.join(missing)}",
            "name a Python interpreter (a wrapper script must pass its arguments on)",
        )
    return said


_ANSWER = {
    "version": list,
    "base_prefix": str,
    "base_executable": str,
    "sites": list,
    "found": dict,
    "rsilab": bool,
}
"""The fields :data:`PROBE` prints, with their JSON types."""


def _unanswered(said: object) -> list[str]:
    """The fields of :data:`_ANSWER` that ``said`` lacks or holds as another type."""
    if not isinstance(said, dict):
        return list(_ANSWER)
    wrong = [k for k, kind in _ANSWER.items() if not isinstance(said.get(k), kind)]
    version = said.get("version")
    if "version" not in wrong and not (
        isinstance(version, list) and len(version) == 2 and all(type(v) is int for v in version)
    ):
        wrong.append("version")
    found = said.get("found")
    if isinstance(found, dict) and not all(
        isinstance(v, dict) and "version" in v and "error" in v for v in found.values()
    ):
        wrong.append("found")
    return wrong


def _names(lines: Sequence[str]) -> list[str]:
    return [m.group(1) if (m := _LINE.match(line)) else line for line in lines]


def _link(source: str, target: str) -> None:
    """A hard link, or a copy where links cannot be made (another filesystem)."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _make_venv(runtime: Runtime, said: dict[str, Any]) -> Path:
    """The venv of the adopted base interpreter at the runtime's path; its site-packages."""
    executable = Path(os.path.realpath(said["base_executable"]))
    bin_dir = runtime.path / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("python", "python3"):
        (bin_dir / name).symlink_to(executable)
    version = "{}.{}".format(*said["version"])
    cfg = f"home = {executable.parent}\ninclude-system-site-packages = false\nversion = {version}\n"
    (runtime.path / "pyvenv.cfg").write_text(cfg, "utf-8")
    site = runtime.path / "lib" / f"python{version}" / "site-packages"
    site.mkdir(parents=True)
    return site


def _link_sites(sites: Sequence[str], target: Path, log: Callable[[str], None]) -> None:
    """Link every entry of ``sites`` into ``target`` (the first of a name wins), rsilab's out."""
    for folder in sites:
        if not Path(folder).is_dir() or Path(folder).resolve() == target.resolve():
            continue
        log(f"linking the packages of {folder}")
        for entry in sorted(os.listdir(folder)):
            source, dest = Path(folder, entry), target / entry
            if _SKIPPED.match(entry) or entry == "__pycache__" or dest.exists():
                continue
            if source.is_dir() and not source.is_symlink():
                shutil.copytree(source, dest, symlinks=True, copy_function=_link)
            else:
                _link(str(source), str(dest))


def _run_build(runtime: Runtime, build: Build, log: Callable[[str], None]) -> dict[str, str]:
    """``build`` run in a subprocess of the runtime's interpreter (see the module)."""
    import rsilab

    ours = [str(Path(rsilab.__file__).parent.parent), *(p for p in sys.path if p)]
    argv = [str(runtime.python), "-I", "-c", BUILD_RUNNER, build.__module__, build.__qualname__]
    log(f"running {build.__module__}.{build.__qualname__} with {runtime.python}")
    done = subprocess.run(
        [*argv, str(runtime.path), json.dumps(ours)], capture_output=True, text=True, check=False
    )
    for line in done.stderr.strip().splitlines()[-20:]:
        log(line)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise AdoptRefused(
            f"the task's build step failed with {runtime.python} (exit {done.returncode}): {last}",
            "the interpreter's packages must run the step; its output's tail is above",
        )
    facts: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    return facts


def adopt_runtime(
    python: Path,
    *,
    extra: Sequence[str] = (),
    build: Build | None = None,
    build_id: str = "",
    force: bool = False,
    path: Path | None = None,
    log: Callable[[str], None] = print,
) -> Runtime:
    """Make the runtime (of a task declaring ``extra`` and ``build``, a build step of
    identity ``build_id``) from ``python``; see the module. ``force`` replaces a runtime
    already at its path.

    Raises:
        AdoptRefused: ``python`` does not run, lacks a requirement or has it at a version
            outside the tolerance, is another Python version, or the runtime's folder is
            taken (without ``force``), or the build step failed.
        RuntimeInstallError: a task line is invalid, or the stripped stdlib failed to build.
    """
    lines = tuple(check_task_requirements(extra))
    text = full_requirements_text(lines)
    wanted = requirement_lines(text)
    said = probe(Path(python), _names(wanted))
    problems = check_probe(said, wanted)
    if problems:
        raise AdoptRefused(
            f"{python} cannot be the runtime: {'; '.join(problems)}",
            "install what is missing into that interpreter, or use `rsilab runtime install`",
        )
    runtime = Runtime(path or runtime_path(lines), lines, build_id if build is not None else None)
    with _locked(runtime.path):
        if runtime.path.exists() and not force:
            raise AdoptRefused(
                f"a runtime is already at {runtime.path}", "pass --force to replace it"
            )
        shutil.rmtree(runtime.path, ignore_errors=True)
        site = _make_venv(runtime, said)
        _link_sites(said["sites"], site, log)
        _write_offline(runtime)
        build_stdlib(Path(os.path.realpath(said["base_prefix"])), runtime.stdlib, log)
        _check_made(runtime, wanted)
        built = _run_build(runtime, build, log) if build is not None else {}
        _make_readable(runtime.path)
        found = {n: said["found"][n]["version"] for n in _names(wanted)}
        stamp = {
            "key": runtime_key(text),
            "adopted": str(python),
            "accepted": found,
            "task_requirements": list(lines),
            "built": built,
            "build_id": build_id if build is not None else None,
            "requirements": text,
            "python": ".".join(map(str, said["version"])),
            "base_prefix": os.path.realpath(said["base_prefix"]),
            "packages": dict(runtime.packages()),
            "stdlib": STDLIB_FORMAT,
        }
        (runtime.path / STAMP_NAME).write_text(json.dumps(stamp, indent=2), "utf-8")
        log(f"runtime adopted from {python} at {runtime.path}")
    return runtime


def _check_made(runtime: Runtime, wanted: Sequence[str]) -> None:
    """AdoptRefused unless the new runtime imports every requirement and not rsilab."""
    again = probe(runtime.python, _names(wanted))
    problems = check_probe(again, wanted)
    if again["rsilab"]:
        problems.append("rsilab is importable from it")
    if problems:
        raise AdoptRefused(
            f"the runtime made at {runtime.path} is not usable: {'; '.join(problems)}",
            "report this: adopting should have linked every requirement",
        )
