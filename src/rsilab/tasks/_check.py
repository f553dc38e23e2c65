"""``check_task``: every problem of a task, including private data readable from a sandbox.

:func:`check_toml` checks a task file in one pass even when its spec is invalid (the parts
that validate go through the later stages); :func:`check_run` runs one experiment on dev.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rsilab.errors import write_refused
from rsilab.records import DataTier
from rsilab.sandbox.base import Limits, RunSpec, Sandbox
from rsilab.sandbox.owners import owned_prefix
from rsilab.sandbox.shown import UNREADABLE_HINT
from rsilab.sandbox.shown import problem as model_problem
from rsilab.tasks._experiment import ExperimentFailed, Outcome, run_experiment
from rsilab.tasks._harness import Manifest, ManifestError, load_manifest
from rsilab.tasks._probe import PROBE_SOURCE, Hit, needles
from rsilab.tasks._salvage import partial_benchmarks, salvage
from rsilab.tasks._samples import TIERS, FileSplits
from rsilab.tasks._spec import Benchmark, Task, TrapKind
from rsilab.tasks._splits import SplitError, Splits, content_hash, make_splits, read_jsonl
from rsilab.tasks._toml import TaskLoadError, read_toml, validate_toml
from rsilab.tasks._variants import VariantError, apply_variant

PROBE_ITEMS = 12
"""Private items per benchmark searched for from inside the sandbox."""

PROBE_ROOTS = (".", "/tmp", "/home", "/root", "/work", "/srv", "/opt", "/var", "/mnt", "/")
"""Where the search looks, in this order: the workspace and data-holding places first."""

_COMMON_SUFFIXES = (".py", ".pyc")
"""Data sources with these suffixes are not searched for by name: every Python install holds
thousands of ``__init__.py`` and ``utils.py``; they are found by path and by content."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a task. Errors fail ``task check``; warnings are printed only."""

    where: str
    message: str
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        return f"{self.severity}: {self.where}: {self.message}"


def check_task(
    task: Task,
    sandbox: Sandbox | None,
    secret: bytes,
    *,
    probe_seconds: float = 30.0,
    probe_roots: tuple[str, ...] = PROBE_ROOTS,
) -> list[Problem]:
    """Every problem found in ``task``; an empty list means it is sound.

    Checks the harness folder and manifest, every benchmark's splits (present, non-empty,
    unique ids, private tiers disjoint from train and dev), declared data sources and traps,
    then, when ``sandbox`` is given, runs a search inside it (workspace: a copy of the
    harness) for a sample of private items and the data sources. Never raises for a bad task.
    """
    return _check_all(task, sandbox, secret, probe_seconds, probe_roots, harness_ok=True)


def check_toml(
    path: Path,
    sandbox: Sandbox | None,
    secret: bytes,
    *,
    probe_seconds: float = 30.0,
    probe_roots: tuple[str, ...] = PROBE_ROOTS,
) -> tuple[Task | None, list[Problem]]:
    """The task in a task.toml (None when its spec is invalid) and every problem of the file.

    Spec problems come first, as ``task.toml: field: message``; the parts that validate on
    their own (harness, each benchmark's samples, data sources, traps) then go through the
    stages of :func:`check_task`, so one pass reports every fault. Never raises.
    """
    try:
        path, data, lines, failed = read_toml(path)
    except TaskLoadError as exc:
        # each problem names the file already: ``task.toml: not valid TOML: ...``
        return None, [Problem(where, message) for where, _, message in _split(exc.problems)]
    task = validate_toml(path, data, lines, failed)
    problems = [Problem(where, message) for where, _, message in _split(lines)]
    parts, harness_ok = (task, True) if task is not None else salvage(data)
    # a benchmark kept only for its samples has no tolerance of its own to warn about
    partial = partial_benchmarks(data) if task is None else set()
    found = _check_all(
        parts, sandbox, secret, probe_seconds, probe_roots, harness_ok=harness_ok, partial=partial
    )
    return task, problems + found


def _split(lines: Collection[str]) -> list[tuple[str, str, str]]:
    """``where: message`` lines as (where, ": ", message)."""
    return [line.partition(": ") for line in lines]


def check_run(task: Task, sandbox: Sandbox, secret: bytes) -> tuple[list[Problem], Outcome | None]:
    """Run train (if the harness trains) and predict once on dev in ``sandbox``, scored.

    A failed job is an error carrying its stderr tail; a benchmark with every output invalid is
    an error, one with some invalid a warning. Never raises for a bad task.
    """
    if task.model is not None:  # what a campaign's preflight refuses, said the same way
        # a sandbox that runs jobs as a user of its own names it; a plain process runs as us
        uid, gid = getattr(sandbox, "uid", os.getuid()), getattr(sandbox, "gid", os.getgid())
        wrong = model_problem(task.model, uid, gid)
        if wrong is not None:
            return [
                Problem(
                    "run",
                    f"its jobs cannot use the model at {task.model}: {wrong}; {UNREADABLE_HINT}",
                )
            ], None
    try:
        outcome = run_experiment(
            task, sandbox, secret, tier=DataTier.DEV, limits=task.experiment_limits()
        )
    except ExperimentFailed as exc:
        return [Problem("run", str(exc))], None
    except (SplitError, ManifestError, OSError, ValueError) as exc:
        if write_refused(exc) is not None:
            raise  # this machine's disk, not the task: the command's disk error, not a problem
        return [Problem("run", f"could not start: {exc}")], None
    problems = []
    for bench, scored in outcome.samples.items():
        bad = [s for s in scored if not s.valid]
        if bad:
            every = len(bad) == len(scored)
            severity: Literal["error", "warning"] = "error" if every else "warning"
            message = f"{len(bad)} of {len(scored)} dev outputs invalid (first: {bad[0].note})"
            problems.append(Problem(f"run: {bench}", message, severity))
    return problems, outcome


def _check_tolerances(task: Task, partial: Collection[str] = ()) -> list[Problem]:
    """A warning for each non-target whose tolerance is 0 (not for the ``partial`` ones, whose
    invalid table left only their samples to check).

    The controller accepts a candidate only when every non-target's lower bound (one-sided
    0.05) is at least ``-tolerance``; at 0 that asks for evidence that the non-target got
    better, which a noisy benchmark left unchanged shows about one time in twenty, so nearly
    every candidate is refused for a regression it did not make. It is a warning, not an
    error: a benchmark that scores the same every run (a unit-test suite that always passes)
    does hold at 0.
    """
    return [
        Problem(
            f"benchmarks.{bench.name}",
            "a non-target with tolerance 0: a candidate is accepted only when this benchmark "
            "is shown to be no worse at all, which an unchanged noisy score rarely shows, so "
            "most candidates will be refused; set tolerance to the largest drop you accept "
            "(in score units)",
            "warning",
        )
        for bench in task.benchmarks
        if not bench.target and bench.tolerance == 0 and bench.name not in partial
    ]


def _check_all(
    task: Task,
    sandbox: Sandbox | None,
    secret: bytes,
    probe_seconds: float,
    probe_roots: tuple[str, ...],
    *,
    harness_ok: bool,
    partial: Collection[str] = (),
) -> list[Problem]:
    problems = _check_harness(task) if harness_ok else []
    problems += _check_tolerances(task, partial)
    if task.model is not None and not task.model.exists():
        problems.append(Problem("model", f"{task.model} does not exist on this host"))
    all_splits: dict[str, Splits] = {}
    for bench in task.benchmarks:
        splits, found = _splits(task, bench, secret)
        problems += found
        if splits is not None:
            all_splits[bench.name] = splits
            problems += _check_splits(bench.name, splits)
    for source in task.data_sources:
        if not source.exists():
            problems.append(
                Problem("data_sources", f"{source} does not exist on this host", "warning")
            )
    for trap in task.traps:
        in_harness = trap.kind in (TrapKind.EDITABLE_EVALUATOR, TrapKind.HARDCODED_OUTPUTS)
        if in_harness and not trap.planted and not (task.harness / trap.path).exists():
            problems.append(Problem("traps", f"{trap.kind.value}: {trap.path} not in the harness"))
    if harness_ok:
        problems += check_variants(task)
    if sandbox is None:
        problems.append(Problem("sandbox", "no sandbox given: leak search skipped", "warning"))
    elif harness_ok and task.harness.is_dir():
        problems += _probe(task, sandbox, secret, all_splits, probe_seconds, probe_roots)
    return problems


def check_variants(task: Task) -> list[Problem]:
    """An error for each code variant that does not apply to the shipped harness (a file it
    edits is missing or unreadable, or a text it replaces is not found exactly once)."""
    problems = []
    for variant in task.code_variants:
        try:
            apply_variant(variant, lambda path: (task.harness / path).read_text("utf-8"))
        except (OSError, UnicodeDecodeError, VariantError) as exc:
            problems.append(Problem(f"code_variants.{variant.name}", str(exc)))
    return problems


def _splits(task: Task, bench: Benchmark, secret: bytes) -> tuple[Splits | None, list[Problem]]:
    """The benchmark's splits; for file splits, every unreadable file is its own problem."""
    where = f"benchmarks.{bench.name}"
    source = bench.samples
    if isinstance(source, FileSplits):
        splits: Splits = {}
        problems = []
        for tier in TIERS:
            try:
                splits[tier] = read_jsonl(source.files[tier])
            except SplitError as exc:
                problems.append(Problem(where, f"split {tier.value}: {exc}"))
        if problems:
            return splits, problems
        # read here, before ids are blinded, so the line is named as the file has it
        problems = _check_targets(where, splits, source.files)
    else:
        problems = []
    try:
        return make_splits(task, bench, secret), problems
    except (SplitError, OSError, ValueError) as exc:
        return None, [Problem(where, f"cannot build splits: {exc}")]


def _check_harness(task: Task) -> list[Problem]:
    folder = task.harness
    if not folder.is_dir():
        return [Problem("harness", f"{folder} is not a folder")]
    if not os.access(folder, os.R_OK | os.X_OK):
        return [Problem("harness", f"{folder} is not readable")]
    try:
        manifest = load_manifest(folder)
    except ManifestError as exc:
        return [Problem("harness", p) for p in exc.problems]
    return _check_manifest(task, manifest)


def _check_manifest(task: Task, manifest: Manifest) -> list[Problem]:
    problems = []
    if manifest.predict is None and task.predict_driver is None:
        problems.append(Problem("harness", "harness.toml names no predict command"))
    if task.predict_driver is not None:
        from rsilab.tasks._drivers import get_driver

        try:
            get_driver(task.predict_driver)
        except KeyError as exc:
            problems.append(Problem("predict_driver", str(exc.args[0])))
    for argv in (manifest.train, manifest.predict, manifest.improve):
        for arg in argv or []:
            if arg.endswith(".py") and not (task.harness / arg).is_file():
                problems.append(Problem("harness", f"entry script {arg} not found"))
    if manifest.config is not None and not (task.harness / manifest.config).is_file():
        problems.append(Problem("harness", f"config file {manifest.config} not found"))
    elif manifest.config is not None and task.search_space:
        problems += check_knob_values(task, manifest.config)
    return problems


def check_knob_values(task: Task, name: str) -> list[Problem]:
    """The harness config's value of each declared knob against its declaration: an error
    when it is no value of the knob (the campaign would start from it, and every search step
    that keeps it would too); a warning when it is not the declared default, since the
    campaign starts from the config as it is. Nothing for a config that is no JSON object."""
    where = f"{task.harness.name}/{name}"  # as task.toml names the folder, usually
    try:
        config = json.loads((task.harness / name).read_text("utf-8"))
    except (OSError, ValueError):
        config = None
    if not isinstance(config, dict):
        return []  # a config in another format (YAML): the runner says what it can edit
    problems = []
    for knob in task.search_space:
        if knob.name not in config:
            continue
        value = config[knob.name]
        wrong = knob.misfit(value)
        if wrong is not None:
            problems.append(
                Problem(
                    where,
                    f"knob {knob.name} is {value!r}, {wrong} as search_space declares it; "
                    "the campaign starts from this file, so set a declared value",
                )
            )
        elif value != knob.default:
            problems.append(
                Problem(
                    where,
                    f"knob {knob.name} is {value!r} but search_space declares the default "
                    f"{knob.default!r}; the campaign starts from this file's value: make "
                    "them agree",
                    "warning",
                )
            )
    return problems


def _check_splits(name: str, splits: Splits) -> list[Problem]:
    problems = []
    for tier in TIERS:
        samples = splits.get(tier, [])
        if not samples:
            problems.append(
                Problem(f"benchmarks.{name}", f"split {tier.value} is missing or empty")
            )
        ids = [s.id for s in samples]
        if len(set(ids)) != len(ids):
            problems.append(Problem(f"benchmarks.{name}", f"split {tier.value}: repeated ids"))
    public = [s for t in (DataTier.TRAIN, DataTier.DEV) for s in splits.get(t, [])]
    public_ids = {s.id for s in public}
    public_hashes = {content_hash(s) for s in public}
    for tier in (DataTier.ACCEPT, DataTier.FINAL):
        private = splits.get(tier, [])
        shared = sum(1 for s in private if s.id in public_ids or content_hash(s) in public_hashes)
        if shared:
            problems.append(
                Problem(
                    f"benchmarks.{name}",
                    f"{shared} {tier.value} item(s) also in train/dev (same id or input)",
                )
            )
    return problems


def _check_targets(where: str, splits: Splits, files: dict[DataTier, Path]) -> list[Problem]:
    """An error when some items have no ``target`` and others have one: an item that lost its
    target is scored against null, quietly wrong. (A benchmark whose scorer needs no target,
    a kernel's speed-up, gives none to any item.)"""
    items = [(tier, s) for tier in TIERS for s in splits.get(tier, [])]
    missing = [(tier, s) for tier, s in items if s.target is None]
    if not missing or len(missing) == len(items):
        return []
    tier, first = missing[0]
    return [
        Problem(
            where,
            f'{len(missing)} of {len(items)} items have no "target" (first: id {first.id!r} '
            f'in {files[tier]}): give every item its "target"',
        )
    ]


def _probe(
    task: Task,
    sandbox: Sandbox,
    secret: bytes,
    all_splits: dict[str, Splits],
    seconds: float,
    roots: tuple[str, ...],
) -> list[Problem]:
    pairs = [("lab secret", secret.hex())]
    for bench, splits in all_splits.items():
        for tier in (
            DataTier.ACCEPT,
            DataTier.FINAL,
        ):  # an id does not say its tier: the label does
            private = splits[tier]
            some = private[:: max(1, 2 * len(private) // PROBE_ITEMS)][: PROBE_ITEMS // 2]
            pairs += needles(some, f"{bench} {tier.value}")
    spec = {
        "needles": pairs,
        "names": sorted({p.name for p in task.data_sources if p.suffix not in _COMMON_SUFFIXES}),
        "paths": [str(p.resolve()) for p in task.data_sources],
        "roots": list(roots),
        "seconds": seconds,
        "max_bytes": 64 * 1024 * 1024,
    }
    with tempfile.TemporaryDirectory(prefix=owned_prefix("check")) as tmp:
        workspace = Path(tmp) / "workspace"
        shutil.copytree(task.harness, workspace, symlinks=True)
        limits = Limits(cpu_s=seconds * 2 + 30, wall_s=seconds * 2 + 30, memory_mb=2048)
        argv = ("python", "-I", "-c", PROBE_SOURCE)
        stdin = json.dumps(spec).encode()
        # The probe only reads: a read-only workspace needs no sandbox-owned folder.
        job = RunSpec(argv, workspace, limits, stdin=stdin, read_only_workspace=True)
        result = sandbox.run(job)
    hits, summary = _parse(result.stdout)
    problems = [
        Problem(
            "sandbox", f"{hit.label} readable from inside the sandbox at {hit.path} ({hit.kind})"
        )
        for hit in hits
    ]
    if summary is None:
        err = result.stderr.decode(errors="replace").strip()[-300:]
        problems.append(Problem("sandbox", f"the leak search did not finish: {err or result}"))
    elif summary.get("truncated"):
        msg = (
            f"leak search stopped after {seconds:g} s: {summary.get('files')} of "
            f"{summary.get('listed')} listed files searched (raise --probe-seconds)"
        )
        problems.append(Problem("sandbox", msg, "warning"))
    return problems


def _parse(stdout: bytes) -> tuple[list[Hit], dict[str, object] | None]:
    hits: list[Hit] = []
    summary: dict[str, object] | None = None
    for line in stdout.decode(errors="replace").splitlines():
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(item, dict) and item.get("done"):
            summary = item
        elif isinstance(item, dict):
            hits.append(Hit(str(item.get("path")), str(item.get("kind")), str(item.get("label"))))
    return hits, summary
