"""The ``python_tests`` scorer: model-written Python programs run against unit tests, per-problem
pass@k, every program of one scoring call in ONE sandbox job.

Contract. ``Sample.target`` is ``{"entry": NAME, "tests": [LINE, ...]}``: a program passes when
it defines a callable ``NAME`` and every test line (``assert add_7(2) == 9``), run after it in
the same namespace, passes within the per-program limits (:data:`PROGRAM_LIMITS`). The output
is one program (a string) or a list of n programs (n samples of one problem). With c of the n
passing, the score is the unbiased pass@k estimator 1 - C(n-c, k) / C(n, k)
(:func:`~rsilab.tasks.pass_at_k`): ``python_tests`` is pass@1 (c / n, the expected share of
passing samples), ``python_tests@K`` is pass@K and needs n >= K samples. An output that is not
text or a list of text (or an empty list, or fewer than K programs) is invalid. A program that
hangs, forks, runs out of memory, prints garbage or reaches for files, the network or the
driver changes only its own verdict (it fails, unless its tests pass all the same).

Where programs run. The driver :mod:`rsilab.tasks._code_driver` runs in one sandbox job per
call (one tier of one benchmark) and judges each program in a confined child process of its
own (see its docstring). The sandbox is the caller's when it is a security boundary (an
experiment's bubblewrap sandbox); otherwise - the controller's evaluation and the dev
evaluation records have no sandbox at hand, and a process sandbox is no boundary - it is a
bubblewrap sandbox made for scoring (one per process and runtime), bound to no lab: a fresh
sandbox uid that owns nothing, nothing of the host but /usr and the runtime, no network. When
bubblewrap cannot be used the scoring raises :class:`~rsilab.tasks.ScorerUnavailable`: model
code never runs unsandboxed.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import JsonValue

from rsilab.sandbox import BwrapSandbox, current_runtime
from rsilab.sandbox.base import (
    Limits,
    RunResult,
    RunSpec,
    Sandbox,
    SandboxError,
    SandboxUnavailable,
)
from rsilab.tasks._samples import Sample
from rsilab.tasks._scorers import (
    BatchScoreFn,
    Scored,
    ScorerFamily,
    ScorerInfo,
    ScorerUnavailable,
    batch_info,
    pass_at_k,
    register_batch_scorer,
    register_family,
)

DRIVER = Path(__file__).with_name("_code_driver.py")
MAX_JOBS = 3
"""Sandbox jobs one call may use: a driver killed mid-way (it should not be) is started again
on the programs after the one it was running, which fails; past this the scoring raises."""
_SCRATCH_MB = 16


@dataclass(frozen=True)
class ProgramLimits:
    """What each program may use (the driver enforces them per program, not per job)."""

    cpu_s: float = 1.0
    wall_s: float = 3.0
    memory_mb: int = 256
    """Address space (``RLIMIT_AS``) of the program's process."""
    file_kb: int = 1024
    """Largest file it may write (into its own temporary folder; removed after it)."""


PROGRAM_LIMITS = ProgramLimits()


@dataclass(frozen=True)
class Program:
    """One program to judge: its text, the function it must define, the test lines."""

    program: str
    entry: str
    tests: tuple[str, ...]


@dataclass(frozen=True)
class Verdict:
    """Whether a program passed, and why not (``wall-time limit``, ``test 2 failed: ...``)."""

    passed: bool
    note: str = ""


def job_limits(count: int, limits: ProgramLimits) -> Limits:
    """The scoring job's limits for ``count`` programs: each program's worst case, summed,
    plus room for the driver; memory for the driver and one program at a time."""
    return Limits(
        cpu_s=count * (limits.cpu_s + 1.0) + 30.0,
        wall_s=count * (limits.wall_s + 0.5) + 30.0,
        memory_mb=2 * limits.memory_mb + 256,
        processes=16,
        output_bytes=count * 512 + 65536,
        disk_mb=_SCRATCH_MB + 4 * limits.file_kb // 1024,
    )


def run_programs(
    programs: Sequence[Program],
    sandbox: Sandbox | None = None,
    limits: ProgramLimits = PROGRAM_LIMITS,
) -> list[Verdict]:
    """Judge ``programs`` in one sandbox job (see the module docstring); one verdict each.

    Raises:
        ScorerUnavailable: no usable bubblewrap sandbox, or the driver cannot confine programs
            here, or it died more than :data:`MAX_JOBS` times.
    """
    box = usable_sandbox(sandbox)
    verdicts: list[Verdict] = []
    for _ in range(MAX_JOBS):
        pending = programs[len(verdicts) :]
        if not pending:
            return verdicts
        got, died = _one_job(box, pending, limits)
        verdicts += got
        if died:  # the program that was running when the job ended takes the blame
            verdicts.append(Verdict(False, f"the scoring job ended while it ran: {died}"))
    if len(verdicts) < len(programs):
        raise ScorerUnavailable(
            f"python_tests: the scoring job ended early {MAX_JOBS} times",
            "look at the programs of this tier; report it as a bug of the driver",
        )
    return verdicts


def _one_job(
    box: Sandbox, programs: Sequence[Program], limits: ProgramLimits
) -> tuple[list[Verdict], str]:
    """Verdicts of one job on ``programs`` (a prefix, when it ended early) and why it ended
    early ("" when it did not)."""
    request = {
        "limits": dataclasses.asdict(limits),
        "programs": [dataclasses.asdict(p) for p in programs],
    }
    try:
        with box.scratch(_SCRATCH_MB, kind="python-tests") as folder:
            (folder / "driver.py").write_bytes(DRIVER.read_bytes())
            spec = RunSpec(
                argv=("python", "-I", "-S", "driver.py"),
                workspace=folder,
                limits=job_limits(len(programs), limits),
                stdin=json.dumps(request).encode(),
                read_only_workspace=True,
            )
            result = box.run(spec)
    except (SandboxUnavailable, SandboxError) as exc:
        raise ScorerUnavailable(
            f"python_tests cannot run its sandbox job: {exc}",
            "install bubblewrap (`make system-deps`) and the runtime (`rsilab runtime install`)",
        ) from exc
    return _parse(result, len(programs))


def _parse(result: RunResult, count: int) -> tuple[list[Verdict], str]:
    verdicts: list[Verdict] = []
    ready = False
    for line in result.stdout.decode(errors="replace").splitlines():
        try:
            said = json.loads(line)
        except ValueError:  # a line cut short when the job was killed
            break
        if "error" in said:
            raise ScorerUnavailable(
                f"python_tests cannot confine programs here: {said['error']}",
                "run rsilab on x86-64 or aarch64 Linux with seccomp",
            )
        if said.get("ready"):
            ready = True
        elif said.get("i") == len(verdicts):
            verdicts.append(Verdict(bool(said["passed"]), str(said["note"])))
    if len(verdicts) == count:
        return verdicts, ""
    why = result.killed.value if result.killed else f"exit {result.exit_code}"
    if not ready:
        tail = result.stderr.decode(errors="replace").strip()[-300:]
        raise ScorerUnavailable(
            f"python_tests: the scoring driver did not start ({why}): {tail}",
            "check the runtime with `rsilab doctor`",
        )
    return verdicts, why


_defaults: dict[Path, BwrapSandbox] = {}
_lock = threading.Lock()


def usable_sandbox(sandbox: Sandbox | None) -> Sandbox:
    """``sandbox`` when it is a security boundary, else this process's scoring sandbox for the
    current runtime (bubblewrap bound to no lab), prepared on first use.

    Raises:
        ScorerUnavailable: bubblewrap cannot be used here.
    """
    if sandbox is not None and sandbox.is_security_boundary:
        return sandbox
    runtime = current_runtime()
    with _lock:
        if runtime.path not in _defaults:
            made = BwrapSandbox(runtime)
            try:
                made.prepare()
            except SandboxUnavailable as exc:
                raise ScorerUnavailable(
                    "python_tests runs model-written programs only in the bubblewrap sandbox, "
                    f"which cannot be used here: {exc.message}",
                    exc.hint or "install bubblewrap",
                ) from exc
            _defaults[runtime.path] = made
        return _defaults[runtime.path]


def _problem(sample: Sample) -> tuple[str, tuple[str, ...]] | str:
    """(entry, tests) of a sample's target, or why the target is malformed."""
    target = sample.target
    entry = target.get("entry") if isinstance(target, dict) else None
    tests = target.get("tests") if isinstance(target, dict) else None
    if not isinstance(entry, str) or not entry.isidentifier():
        return 'target is not {"entry": NAME, "tests": [...]} with NAME a Python name'
    if not isinstance(tests, list) or not all(isinstance(t, str) for t in tests):
        return "target's tests are not a list of strings"
    return entry, tuple(str(t) for t in tests)


def _programs(output: JsonValue, k: int) -> list[str] | str:
    """The output's programs, or why it is invalid."""
    if isinstance(output, str):
        programs = [output]
    elif isinstance(output, list) and output and all(isinstance(p, str) for p in output):
        programs = [str(p) for p in output]
    else:
        return "output is not a program (text) or a non-empty list of programs"
    if len(programs) < k:
        return f"pass@{k} needs at least {k} programs, got {len(programs)}"
    return programs


def score_programs(
    pairs: Sequence[tuple[Sample, JsonValue]], sandbox: Sandbox | None, k: int = 1
) -> list[Scored]:
    """pass@k of each (sample, output) pair; every program of every pair in one job (identical
    programs of one problem run once)."""
    wanted: dict[Program, int] = {}
    plans: list[list[Program] | str] = []
    for sample, output in pairs:
        problem, programs = _problem(sample), _programs(output, k)
        if isinstance(problem, str) or isinstance(programs, str):
            plans.append(problem if isinstance(problem, str) else str(programs))
            continue
        made = [Program(text, *problem) for text in programs]
        for program in made:
            wanted.setdefault(program, len(wanted))
        plans.append(made)
    verdicts = run_programs(list(wanted), sandbox) if wanted else []
    scored = []
    for (sample, _), plan in zip(pairs, plans, strict=True):
        if isinstance(plan, str):
            scored.append(Scored(sample.id, 0.0, False, plan))
            continue
        judged = [verdicts[wanted[p]] for p in plan]
        passed = sum(v.passed for v in judged)
        first = next((v.note for v in judged if not v.passed), "")
        note = f"{passed} of {len(plan)} passed" + (f"; first failure: {first}" if first else "")
        scored.append(Scored(sample.id, pass_at_k(len(plan), passed, k), True, note))
    return scored


def _batch(k: int) -> BatchScoreFn:
    def score(pairs: Sequence[tuple[Sample, JsonValue]], sandbox: Sandbox | None) -> list[Scored]:
        return score_programs(pairs, sandbox, k)

    return score


def _describe(k: int) -> str:
    return f"pass@{k} of Python programs against the target's unit tests, run in the sandbox."


def _ready() -> None:
    """ScorerUnavailable when bubblewrap cannot confine programs here (see usable_sandbox)."""
    usable_sandbox(None)


def _pass_at(k: int) -> ScorerInfo:
    return batch_info(f"python_tests@{k}", _batch(k), True, 0.0, _describe(k), SOURCES, _ready)


SOURCES = (Path(__file__).read_text("utf-8"), DRIVER.read_text("utf-8"))
"""This module's and the driver's text: the evaluator's hash covers the code that judges."""
register_batch_scorer("python_tests", description=_describe(1), sources=SOURCES, ready=_ready)(
    _batch(1)
)
_FAMILY = ScorerFamily(
    pattern="python_tests@K",
    prefix="python_tests@",
    make=_pass_at,
    higher_is_better=True,
    invalid_score=0.0,
    description=(
        'Per problem (target {"entry", "tests"}), the unbiased pass@K of the output\'s n >= K '
        "programs against the unit tests, run in one sandbox job per tier; python_tests is "
        "pass@1."
    ),
)

register_family(_FAMILY)
