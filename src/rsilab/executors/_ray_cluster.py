"""Joining a Ray cluster safely: token authentication, and the same environment on every node.

:func:`connect` is the preflight of the Ray executor. It fails closed, with one line saying
what is wrong and what to do (a :class:`~rsilab.errors.UserError`), before any job runs:

- **Authentication.** Ray (2.52 and later) authenticates every RPC with a shared token when
  the cluster runs with ``RAY_AUTH_MODE=token``; the token comes from ``RAY_AUTH_TOKEN``,
  the file ``RAY_AUTH_TOKEN_PATH`` names, or ``~/.ray/auth_token``. For a cluster at an
  address, this process must hold a token, and a separate probe process that holds none
  (``RAY_AUTH_MODE=disabled``, an empty ``HOME``) must be turned away by the cluster's GCS:
  a cluster that answers it is unauthenticated and is refused. Without an address, rsilab
  starts a cluster of its own on this machine with a fresh random token (never written to
  disk; it lives in this process's environment), so no probe is needed.
- **Environment.** A Ray task pinned to each alive node (hard node affinity, no retries)
  reports that node's :func:`~rsilab.executors._ray_node.environment` - the venv's prefix,
  Python, rsilab's source digest, Ray's version, the runtime venv's path and install stamp -
  and whether bubblewrap runs a probe job there, all for the runtime the executor's jobs use
  (a task's own: its path, stamp and the sha256 of its built files such as a base model, read
  on each node). Every digest must equal this process's own;
  the venv and the runtime venv must therefore exist at the same paths on every node
  (install rsilab and run ``rsilab runtime install`` on each). Nothing is shipped by Ray's
  ``runtime_env``.
"""

from __future__ import annotations

import gc
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rsilab.errors import UserError
from rsilab.executors._ray_node import digest, environment, node_check

TOKEN_ENV = "RAY_AUTH_TOKEN"
TOKEN_PATH_ENV = "RAY_AUTH_TOKEN_PATH"
MODE_ENV = "RAY_AUTH_MODE"
PROBE_TIMEOUT_S = 30.0
CHECK_TIMEOUT_S = 180.0
DEATH_WAIT_S = 60.0
"""How long a node whose check could not be scheduled may take to be marked dead."""

_PROBE = """
import sys
from ray._raylet import GcsClient
from ray.exceptions import AuthenticationError
try:
    GcsClient(address=sys.argv[1]).internal_kv_get(b"rsilab-probe", None, timeout=5)
except AuthenticationError:
    print("refused")
except Exception as exc:
    print("error:", type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
else:
    print("answered")
"""
"""Run in a process holding no token: 'refused' is what an authenticated cluster says."""


class RayRefused(UserError):
    """The Ray cluster cannot be used safely; the message says why, the hint what to do."""


@dataclass(frozen=True)
class Cluster:
    """A connection this process holds (``ray.init`` done and checked).

    Attributes:
        address: the GCS address joined; None for a cluster rsilab started here.
        own: rsilab started it (and shuts it down on :meth:`close`).
        nodes: the alive nodes' ids, each checked at connection.
        cpus: CPUs the cluster offers in all.
    """

    address: str | None
    own: bool
    nodes: tuple[str, ...]
    cpus: float

    def close(self) -> None:
        """Disconnect (and stop a cluster rsilab started). Idempotent."""
        import ray

        ray.shutdown()


def connect(address: str | None, *, num_cpus: int | None = None, runtime: str = "") -> Cluster:
    """Join the cluster at ``address`` (``HOST:PORT`` of its GCS), or start one here when
    None with ``num_cpus`` CPUs (default: all), then check every node (see the module) for
    the runtime the descriptor ``runtime`` names (:func:`._ray_node.describe`; "" the base).

    Raises:
        RayRefused: no token, an unauthenticated or unreachable cluster, a node whose
            environment differs, or one where bubblewrap cannot run jobs.
    """
    try:
        import ray
    except ImportError as exc:
        raise RayRefused(
            "the Ray executor needs Ray, which is not installed in this environment",
            "install rsilab's ray extra (pip install 'rsilab[ray]') here and on every node",
        ) from exc
    if ray.is_initialized():
        raise RayRefused(
            "this process is already connected to a Ray cluster",
            "use one Ray executor per process",
        )
    if address is None:
        _start_own(num_cpus)
    else:
        check_authenticated(address)
        _token_mode()
        _init(address=address)
    try:
        nodes = check_nodes(runtime)
    except BaseException:
        ray.shutdown()
        raise
    cpus = float(ray.cluster_resources().get("CPU", 0.0))  # type: ignore[no-untyped-call]
    return Cluster(address, address is None, nodes, cpus)


def _init(**kwargs: Any) -> None:
    import logging

    import ray

    before = _children()
    try:
        ray.init(logging_level=logging.WARNING, log_to_driver=False, **kwargs)
    except Exception as exc:  # ray raises ConnectionError, RuntimeError, AuthenticationError
        _stop_started(before)
        raise RayRefused(
            f"cannot join the Ray cluster: {type(exc).__name__}: {_first_line(exc)}",
            "check the address (HOST:PORT of its GCS) and that the cluster's token is in "
            f"{TOKEN_ENV}, {TOKEN_PATH_ENV} or ~/.ray/auth_token",
        ) from exc


def _children() -> set[int]:
    """The ids of this process's living child processes (read from /proc)."""
    me = str(os.getpid())
    found: set[int] = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # it exited while we looked
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        fields = text[text.rfind(")") + 2 :].split()
        if len(fields) > 1 and fields[1] == me and fields[0] != "Z":
            found.add(int(stat.parent.name))
    return found


def _stop_started(before: set[int]) -> None:
    """Stop and reap what a failed ``ray.init`` started.

    A start that fails half way (its GCS turns the driver away, its raylet times out) leaves
    the processes it did start running: Ray records them only on the node it never finished
    making, so ``ray.shutdown`` cannot see them. Left alone they outlive the refusal, and
    their ``Popen`` objects warn whenever they are collected. Every child process this
    process gained since ``before`` is killed and reaped, through its ``Popen`` where one
    holds it (so that object knows it ended); ``ray.shutdown`` still runs for a failure that
    came after the node was made.
    """
    import ray

    ray.shutdown()
    started = _children() - before
    if not started:
        return
    # type(), not isinstance(): isinstance falls back to an object's __class__ attribute,
    # which some objects a process holds answer with a warning (torch's deprecated aliases)
    held = [
        found
        for found in gc.get_objects()
        if issubclass(type(found), subprocess.Popen) and found.pid in started
    ]
    for process in held:
        process.kill()
        process.wait()
    for pid in started - {process.pid for process in held}:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):  # gone, or reaped elsewhere
            continue


def _start_own(num_cpus: int | None) -> None:
    """A local cluster on loopback with token authentication and a fresh random token."""
    if not _has_token():
        os.environ[TOKEN_ENV] = secrets.token_hex(32)
    _token_mode()
    _init(num_cpus=num_cpus, include_dashboard=False, _node_ip_address="127.0.0.1")


def _token_mode() -> None:
    """Turn on token authentication for this process and the Ray processes it starts, with
    the token this process holds now.

    Ray reads the mode once into its config, so the config is read again (as Ray's own
    ``ray start`` does when it enables tokens). Ray also caches the token the first time a
    connection reads it, for the life of the process; a later connection whose token has
    changed since (another cluster's, or a fresh one for a cluster started here) would
    otherwise present the stale one and be turned away, so the cache is dropped too. The
    config is read before the cache is dropped, as Ray's own tests do, so a draining worker
    thread never reloads a token under the old mode.
    """
    from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]

    os.environ[MODE_ENV] = "token"
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def _has_token() -> bool:
    if os.environ.get(TOKEN_ENV):
        return True
    path = os.environ.get(TOKEN_PATH_ENV)
    if path:
        return Path(path).is_file()
    return (Path.home() / ".ray" / "auth_token").is_file()


def check_authenticated(address: str) -> None:
    """RayRefused unless this process holds a token and the cluster refuses a client that
    holds none."""
    if not _has_token():
        raise RayRefused(
            f"no Ray authentication token for the cluster at {address}",
            f"put the cluster's token in {TOKEN_ENV} or in the file {TOKEN_PATH_ENV} names "
            "(rsilab joins only clusters started with RAY_AUTH_MODE=token)",
        )
    said = probe_without_token(address)
    if said == "answered":
        raise RayRefused(
            f"the Ray cluster at {address} answers clients without a token: anyone who "
            "reaches it could run code on its nodes",
            "restart it with RAY_AUTH_MODE=token (see `ray get-auth-token --generate`)",
        )
    if said != "refused":
        raise RayRefused(
            f"cannot reach the Ray cluster at {address}: {said}",
            "check the address (HOST:PORT of its GCS) and that the cluster is up",
        )


def probe_without_token(address: str) -> str:
    """What the cluster at ``address`` says to a process holding no token: ``refused``,
    ``answered``, or ``error: ...``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    with tempfile.TemporaryDirectory(prefix="rsilab-ray-probe-") as home:
        env.update({MODE_ENV: "disabled", "HOME": home})
        try:
            done = subprocess.run(
                [sys.executable, "-I", "-c", _PROBE, address],
                env=env,
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return f"error: no answer within {PROBE_TIMEOUT_S:.0f} s"
    lines = done.stdout.strip().splitlines()
    return lines[-1] if lines else f"error: the probe exited {done.returncode}"


def check_nodes(runtime: str = "") -> tuple[str, ...]:
    """Run :func:`~rsilab.executors._ray_node.node_check` on every alive node; the ids of
    those checked. A node that died after it was listed (its check cannot be scheduled, and
    Ray then marks it dead) is left out.

    When only rsilab's source digest differs, the check runs once more: a source tree being
    edited while it was read reads differently a second later, not twice in a row.

    Raises:
        RayRefused: a node's environment differs from this process's, bubblewrap cannot
            run jobs on it, or it did not answer in time.
    """
    import ray

    nodes = ray.nodes()  # type: ignore[no-untyped-call]
    alive = tuple(str(n["NodeID"]) for n in nodes if n.get("Alive"))
    answers, ours = _ask(alive, runtime)
    if any(_differs(ours, a) == ["rsilab"] for a in answers.values()):
        answers, ours = _ask(alive, runtime)
    for node, said in answers.items():
        _compare(node, ours, said)
    return tuple(answers)


def _marked_dead(node: str) -> bool:
    """Whether Ray marks ``node`` dead within :data:`DEATH_WAIT_S`. A node that died after it
    was listed alive (Ray notices a lost node only after missed heartbeats) cannot be checked,
    nor run jobs; one that stays alive yet cannot be checked is refused by the caller."""
    import ray

    deadline = time.monotonic() + DEATH_WAIT_S
    while time.monotonic() < deadline:
        nodes = ray.nodes()  # type: ignore[no-untyped-call]
        if not any(str(n["NodeID"]) == node and n.get("Alive") for n in nodes):
            return True
        time.sleep(0.5)
    return False


def _ask(
    alive: tuple[str, ...], runtime: str = ""
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Every node's answer, and this process's environment read just after them."""
    import ray
    from ray.exceptions import TaskUnschedulableError
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    check = ray.remote(node_check)
    refs = {
        node: check.options(
            num_cpus=0,
            max_retries=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
        ).remote(runtime)
        for node in alive
    }
    answers = {}
    for node, ref in refs.items():
        try:
            answers[node] = json.loads(ray.get(ref, timeout=CHECK_TIMEOUT_S))
        except TaskUnschedulableError as exc:
            if not _marked_dead(node):
                raise RayRefused(
                    f"Ray node {node} could not be checked: {_first_line(exc)}",
                    "check that the node is up, or remove it from the cluster",
                ) from exc
        except Exception as exc:
            raise RayRefused(
                f"Ray node {node} could not be checked: {type(exc).__name__}: {_first_line(exc)}",
                "check that rsilab is installed in the same venv path on every node",
            ) from exc
    return answers, environment(runtime)


def _differs(ours: dict[str, str], said: dict[str, Any]) -> list[str]:
    theirs = said.get("environment", {})
    return sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))


def _compare(node: str, ours: dict[str, str], said: dict[str, Any]) -> None:
    theirs = said.get("environment", {})
    if digest(theirs) != digest(ours):
        differ = _differs(ours, said)
        shown = "; ".join(f"{k}: {theirs.get(k)!r} (here {ours.get(k)!r})" for k in differ)
        raise RayRefused(
            f"Ray node {node} runs another environment than this one: {shown}",
            "install the same rsilab, venv path and runtime (`rsilab runtime install`, with "
            "--task T for a task's own) on every node",
        )
    if said.get("sandbox"):
        raise RayRefused(
            f"Ray node {node} cannot run jobs in bubblewrap: {said['sandbox']}",
            "install bubblewrap on every node (`make system-deps` as root)",
        )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
