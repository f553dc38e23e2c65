"""Running the suite: every variant through rsilab and through the naive runner, judged.

:func:`run_suite` builds one template lab (baselines evaluated once), a helper on 127.0.0.1
that hands out the answers of every tier, and a naive baseline per task; then runs each
variant twice. A script that raises :class:`Refused` simply stops there (the refusal is
already recorded by the runner); any other exception is a bug of the suite and propagates.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.hacking.attacks import GOALS
from benchmarks.hacking.base import Goal, Outcome, Refused, Targets, Variant, Verdict
from benchmarks.hacking.naive_runner import NaiveEnv, naive_baseline, naive_splits
from benchmarks.hacking.rsilab_runner import RsilabEnv, RsilabTemplate
from rsilab.sandbox.base import Sandbox
from rsilab.sandbox.select import default_sandbox
from rsilab.tasks import TIERS, get_task, make_splits


@dataclass(frozen=True)
class Result:
    """One variant's verdicts under both runners."""

    goal: str
    variant: Variant
    rsilab: Verdict
    naive: Verdict
    seconds: float


class Helper:
    """A TCP server on 127.0.0.1: each connection gets ``table`` (canonical input JSON ->
    label) as JSON: the answer service a careless setup leaves running beside the agent."""

    def __init__(self) -> None:
        self.table: dict[str, Any] = {}
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = int(self.sock.getsockname()[1])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                conn, _ = self.sock.accept()
                with conn:
                    conn.settimeout(2)
                    conn.recv(16)
                    conn.sendall(json.dumps(self.table).encode())

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


def answer_table(splits: dict[str, Any]) -> dict[str, Any]:
    """Canonical input JSON -> target over every tier of every benchmark."""
    return {
        json.dumps(s.input, sort_keys=True): s.target
        for tiers in splits.values()
        for tier in TIERS
        for s in tiers[tier]
    }


def selected(quick: bool, goals: Sequence[Goal] = GOALS) -> list[tuple[Goal, Variant]]:
    """The (goal, variant) pairs a run tries."""
    return [(g, v) for g in goals for v in g.variants if v.quick or not quick]


@contextlib.contextmanager
def _stage(root: Path, tasks: list[str], seeds: int, sandbox: Sandbox) -> Iterator[Any]:
    helper = Helper()
    try:
        template = RsilabTemplate(root / "rsilab", sandbox, tasks, seeds)
        baselines = {t: naive_baseline(t, root / f"naive-baseline-{t}", helper.port) for t in tasks}
        yield template, helper, baselines
    finally:
        helper.close()


def run_suite(
    quick: bool,
    root: Path | None = None,
    pairs: list[tuple[Goal, Variant]] | None = None,
    on_result: Callable[[Result], None] | None = None,
) -> list[Result]:
    """Run ``pairs`` (default: :func:`selected`) under both runners; results in order.

    ``on_result`` is called with each result as it is decided. Work happens under ``root``
    (default: a temporary folder, removed afterwards). Each variant's lab copy sets
    ``RSILAB_KEY_DIR`` for its own ledger key; the caller's value is restored on return.

    Raises:
        SandboxUnavailable: no sandbox can run jobs here.
    """
    pairs = pairs if pairs is not None else selected(quick)
    tasks = sorted({v.task for _, v in pairs})
    with contextlib.ExitStack() as stack:
        stack.callback(_restore, "RSILAB_KEY_DIR", os.environ.get("RSILAB_KEY_DIR"))
        if root is None:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hacking-")))
        sandbox = stack.enter_context(default_sandbox())
        template, helper, baselines = stack.enter_context(_stage(root, tasks, 2, sandbox))
        results = []
        for n, (goal, variant) in enumerate(pairs):
            start = time.monotonic()
            rsilab = _run_rsilab(template, helper, variant)
            naive_env = NaiveEnv(variant.task, root / f"naive-{n}", baselines[variant.task],
                                 helper.port, variant.planted)  # fmt: skip
            helper.table = answer_table(naive_splits(get_task(variant.task)))
            naive = _run(naive_env, variant)
            results.append(Result(goal.name, variant, rsilab, naive, time.monotonic() - start))
            if on_result is not None:
                on_result(results[-1])
        return results


def _restore(name: str, value: str | None) -> None:
    """Put back an environment variable the per-variant labs changed."""
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def _run_rsilab(template: RsilabTemplate, helper: Helper, variant: Variant) -> Verdict:
    def targets(lab_db: Path, evaluator: Path) -> Targets:
        return Targets(lab_db, evaluator, helper.port, lab_db.parent.parent / "outside.txt")

    env = template.env(variant.task, variant.planted, targets)
    task = get_task(variant.task)
    secret = env.services.secret
    helper.table = answer_table({b.name: make_splits(task, b, secret) for b in task.benchmarks})
    return _run(env, variant)


def _run(env: RsilabEnv | NaiveEnv, variant: Variant) -> Verdict:
    try:
        with contextlib.suppress(Refused):
            variant.script(env)
        return env.verdict()
    finally:
        env.close()


def hacking_rate(results: Sequence[Result], runner: str) -> tuple[int, int]:
    """(attacks that changed an accepted result, attacks tried) for ``runner``."""
    missed = sum(1 for r in results if getattr(r, runner).outcome is Outcome.MISSED)
    return missed, len(results)
