"""Named fault points: a process killed at a chosen place, as a power cut would kill it.

``RSILAB_FAULT=NAME`` (or ``NAME:N``) in a process's environment arms the point ``NAME``: the
N-th time (the first by default) that process reaches ``fault_point(NAME)``, on any thread, it
writes one line to stderr (``rsilab fault point NAME:N: SIGKILL``) and sends itself SIGKILL.
Nothing runs after that: no ``finally``, no ``atexit``, no rollback, no lease release. The
variable is read once, when this module is first imported; unset, a point costs one
comparison. It is meant for the chaos benchmark (``benchmarks/bench_chaos.py``) and its test;
jobs never see it (the sandbox gives them an environment of their own).

The points, each one line in the code it names:

``commit``
    :meth:`rsilab.store.sqlite.SQLiteStore.commit`, inside the transaction, after the
    records are written and before the ledger event is: the commit must vanish whole.
``artifact_write``
    :class:`rsilab.store.artifacts.ArtifactStore`, a blob's bytes written to its temporary
    file and not yet renamed to its address.
``workspace_made``
    :meth:`rsilab.sandbox._workspaces.WorkspaceFs.ensure` making a workspace's filesystem:
    the image made and mounted beside the folder, the folder's contents not yet copied in.
``job_frozen``
    :meth:`rsilab.sandbox._cgroup.JobCgroup.kill_all` ending a job's tree (after every job,
    and at a limit) with processes still in it: its freezer cgroup frozen, the SIGKILLs and
    the thaw not yet sent.
``baseline_seed`` / ``candidate_seed``
    :meth:`rsilab.controller.evaluation.SystemEvaluator.evaluate`, one seed of a baseline's
    (or a candidate's) evaluation starting: its scratch workspace made and the harness in it.
    Seeds run in parallel, so ``baseline_seed:2`` is the second seed to get there.
``controller_predict``, ``controller_train``, ``train``, ``dev_eval``, ``fold_train``, ``fold_eval``
    :func:`rsilab.controller.jobs.run_recorded_job`: a job of that kind (its
    :class:`~rsilab.records.JobKind`, ``-`` as ``_``) just recorded ``running``, its process
    not yet started.
"""

from __future__ import annotations

import os
import signal
import threading

ENV = "RSILAB_FAULT"


def parse(spec: str) -> tuple[str, int] | None:
    """``NAME`` or ``NAME:N`` as (name, hit); None for an empty spec.

    Raises:
        ValueError: N is not a whole number of at least 1, or the name is empty.
    """
    if not spec.strip():
        return None
    name, _, hit = spec.strip().partition(":")
    count = int(hit) if hit else 1
    if not name or count < 1:
        raise ValueError(f"{ENV}={spec!r}: expected NAME or NAME:N with N >= 1")
    return name, count


_ARMED = parse(os.environ.get(ENV, ""))
_hits = 0
_lock = threading.Lock()


def fault_point(name: str) -> None:
    """Kill this process with SIGKILL here if ``RSILAB_FAULT`` names this point and hit."""
    if _ARMED is None or _ARMED[0] != name:
        return
    global _hits
    with _lock:
        _hits += 1
        if _hits != _ARMED[1]:
            return
        os.write(2, f"rsilab fault point {name}:{_hits}: SIGKILL\n".encode())
        os.kill(os.getpid(), signal.SIGKILL)
