"""Mutants of the security tables, which mutmut cannot reach.

mutmut changes code inside functions only; the facts that matter most here are module-level
tables: which role may call which tool, which record kinds an agent may read, the reserved
workspace folders, the weights suffixes, the record types whose blobs a verify checks, the
socket modes. A :class:`DataMutant` edits one entry of one table in the module's namespace
right after the module runs and before anything imports from it (the same as editing the
literal), in a forked child that then runs the mutant's tests; a failing test kills it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

_LISTING = """
import json, sys
import rsilab, rsilab.mcp.llm_relay, rsilab.mcp.socket_server
from rsilab.controller.guards import WEIGHT_SUFFIXES
from rsilab.expos.guards import WORKSPACE_RESERVED
from rsilab.expos.policy import READABLE_KINDS, TOOL_ROLES
from rsilab.records import RECORD_TYPES, Role
from rsilab.store.verify import _REFERRING
print(json.dumps({
    "roles": [r.value for r in Role],
    "agents": [r.value for r in Role if r.is_agent],
    "tools": {t: sorted(r.value for r in roles) for t, roles in TOOL_ROLES.items()},
    "kinds": sorted(RECORD_TYPES),
    "readable": {r.value: sorted(k) for r, k in READABLE_KINDS.items()},
    "reserved": list(WORKSPACE_RESERVED),
    "suffixes": sorted(WEIGHT_SUFFIXES),
    "referring": [c.__name__ for c in _REFERRING],
    "imported": [m for m in sys.modules if not m.startswith(("rsilab", "__main__"))],
}))
"""

PERMISSION_TESTS = ("tests/expos/test_permission_matrix.py",)
RESERVED_TESTS = ("tests/expos/tools/test_workspace.py", "tests/expos/test_guards.py")
WEIGHT_TESTS = ("tests/controller/test_guards.py",)
VERIFY_TESTS = ("tests/store/test_verify.py",)
ACCEPTANCE_TESTS = ("tests/controller/test_acceptance.py",)
RELAY_TESTS = ("tests/mcp/test_llm_relay.py",)
SOCKET_TESTS = ("tests/mcp/test_socket_server.py",)


@dataclass(frozen=True)
class DataMutant:
    """One edit of one module-level table, and the tests that must notice it."""

    table: str
    """What is edited, for the results table (``TOOL_ROLES``, ``SOCKET_MODE``, ...)."""
    name: str
    module: str
    edit: str
    """Python run in the module's namespace right after the module itself."""
    tests: tuple[str, ...]


def _listing() -> dict[str, Any]:
    """The tables as they are now (read in a subprocess: this process stays free of rsilab,
    so that each forked child imports the edited module afresh)."""
    done = subprocess.run(
        [sys.executable, "-c", _LISTING], cwd=ROOT, capture_output=True, text=True, check=True
    )
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def _flip(table: str, key: str, member: str, present: bool) -> str:
    op = "-" if present else "|"
    return f"{table}[{key}] = {table}[{key}] {op} frozenset({{{member}}})"


def warm_up() -> None:
    """Import every module rsilab imports, but not rsilab: each forked child then imports only
    rsilab (with the edited module) and the tests, in a fraction of a second."""
    import pytest  # noqa: F401

    for name in _listing()["imported"]:
        try:
            importlib.import_module(name)
        except Exception:  # a module that only imports in its own context: the child will
            continue


def data_mutants() -> list[DataMutant]:
    """Every data mutant: each cell of the role x tool and role x kind tables flipped, each
    reserved folder, weights suffix and verified record type dropped, the non-target level
    and the socket modes changed."""
    t = _listing()
    return [
        *_permission_mutants(t),
        *_dropped("WORKSPACE_RESERVED", "rsilab.expos.guards", t["reserved"], RESERVED_TESTS),
        *(
            DataMutant(
                "WEIGHT_SUFFIXES",
                f"{suffix} dropped",
                "rsilab.controller.guards",
                f"WEIGHT_SUFFIXES = WEIGHT_SUFFIXES - {{{suffix!r}}}",
                WEIGHT_TESTS,
            )
            for suffix in t["suffixes"]
        ),
        *(
            DataMutant(
                "_REFERRING",
                f"{name} dropped",
                "rsilab.store.verify",
                f"_REFERRING = tuple(c for c in _REFERRING if c.__name__ != {name!r})",
                VERIFY_TESTS,
            )
            for name in t["referring"]
        ),
        *_value_mutants(),
    ]


def _permission_mutants(t: dict[str, Any]) -> list[DataMutant]:
    """Each cell of the role x tool and agent role x record kind tables, flipped."""
    policy = "rsilab.expos.policy"
    out = []
    for tool, allowed in t["tools"].items():
        for role in t["roles"]:
            verb = "revoked from" if role in allowed else "granted to"
            edit = _flip("TOOL_ROLES", repr(tool), f"Role({role!r})", role in allowed)
            out.append(
                DataMutant("TOOL_ROLES", f"{tool} {verb} {role}", policy, edit, PERMISSION_TESTS)
            )
    for role in t["agents"]:
        for kind in t["kinds"]:
            readable = kind in t["readable"][role]
            verb = "hidden from" if readable else "shown to"
            edit = _flip("READABLE_KINDS", f"Role({role!r})", repr(kind), readable)
            name = f"{kind} {verb} {role}"
            out.append(DataMutant("READABLE_KINDS", name, policy, edit, PERMISSION_TESTS))
    return out


def _value_mutants() -> list[DataMutant]:
    """The non-target level and the socket modes, changed."""
    out = [
        DataMutant(
            "NON_TARGET_ALPHA",
            f"= {alpha}",
            "rsilab.controller.acceptance",
            f"NON_TARGET_ALPHA = {alpha}",
            ACCEPTANCE_TESTS,
        )
        for alpha in (0.1, 0.025)
    ]
    for module, tests in (
        ("rsilab.mcp.llm_relay", RELAY_TESTS),
        ("rsilab.mcp.socket_server", SOCKET_TESTS),
    ):
        out += [
            DataMutant("SOCKET_MODE", f"{module} = {mode}", module, f"SOCKET_MODE = {mode}", tests)
            for mode in ("0o666", "0o660", "0o700")
        ]
    return out


def _dropped(
    table: str, module: str, values: Sequence[str], tests: tuple[str, ...]
) -> list[DataMutant]:
    return [
        DataMutant(
            table,
            f"{value} dropped",
            module,
            f"{table} = tuple(v for v in {table} if v != {value!r})",
            tests,
        )
        for value in values
    ]


class _EditedLoader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader, edit: str) -> None:
        self.inner = inner
        self.edit = edit

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        exec(self.edit, module.__dict__)


class _EditedFinder(importlib.abc.MetaPathFinder):
    """Finds ``module`` as usual, then hands it out with ``edit`` applied."""

    def __init__(self, module: str, edit: str) -> None:
        self.module = module
        self.edit = edit

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.module:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _EditedLoader(spec.loader, self.edit)
        return spec


def _child(mutant: DataMutant, log: Path) -> int:
    """In a forked child: run the mutant's tests against the edited module; pytest's code."""
    import pytest

    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.chdir(ROOT)
    sys.meta_path.insert(0, _EditedFinder(mutant.module, mutant.edit))
    # plugins the warm-up imported (anyio's) cannot have their asserts rewritten: no matter
    quiet = ["-W", "ignore::pytest.PytestAssertRewriteWarning"]
    args = ["-x", "-q", "-p", "no:cacheprovider", *quiet, *mutant.tests]
    return int(pytest.main(args))


def _verdict(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    return {0: "survived", 1: "killed"}.get(code, f"error (pytest exit {code})")


def _fork(mutant: DataMutant, log: Path) -> int:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 3
        try:
            code = _child(mutant, log)
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid


def run_data_mutants(
    mutants: Sequence[DataMutant], workers: int, logs: Path
) -> Iterator[tuple[DataMutant, str, float]]:
    """Run each mutant in a forked child, ``workers`` at a time; yield (mutant, verdict,
    seconds) as each finishes. A run that ends in an error rather than a verdict (pytest
    stopped by something outside the tests) is tried once more; its log is kept as
    ``NNNN.log`` under ``logs``."""
    warm_up()
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    tmp = tempfile.mkdtemp(prefix="rsilab-mutate-")  # short: socket paths stay under the limit
    os.environ["TMPDIR"] = tempfile.tempdir = tmp
    running: dict[int, tuple[int, DataMutant, float, bool]] = {}
    queue = [(index, mutant, False) for index, mutant in enumerate(mutants)]
    while queue or running:
        while queue and len(running) < workers:
            index, mutant, retry = queue.pop(0)
            pid = _fork(mutant, logs / f"{index:04}.log")
            running[pid] = (index, mutant, time.perf_counter(), retry)
        pid, status = os.wait()
        index, mutant, started, retry = running.pop(pid)
        verdict = _verdict(status)
        if verdict.startswith("error") and not retry:
            queue.append((index, mutant, True))
            continue
        yield mutant, verdict, time.perf_counter() - started
    shutil.rmtree(tmp, ignore_errors=True)
