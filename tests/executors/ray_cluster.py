"""A real two-node Ray cluster on this machine, for the Ray executor's tests.

The head is ``ray start --head`` on a free loopback port with token authentication
(``RAY_AUTH_MODE=token`` and a fresh random token) and one CPU. The second node joins it as
a separate process started inside its own mount namespace (``unshare --mount``), where a
tmpfs covers ``hidden`` (the folder holding the test's lab and workspaces): a job that runs
there cannot read the head's files, so whatever it sees came through the executor. The
second node offers the custom resource :data:`NODE2` (one unit), so a job that asks for it
runs there and nowhere else.

Every process here is started in its own session and stopped by its process group.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

NODE2 = "rsilab_test_node2"
"""The custom resource only the second node offers."""
RAY = Path(sys.executable).with_name("ray")
_WAIT = """
import sys, time, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
deadline = time.monotonic() + float(sys.argv[3])
while time.monotonic() < deadline:
    alive = [n for n in ray.nodes() if n.get("Alive")]
    if len(alive) == int(sys.argv[2]) and all(n["Resources"] for n in alive):
        print("ready")
        break
    time.sleep(0.3)
"""


def free_port() -> int:
    """A TCP port free on loopback now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class RayCluster:
    """The head and the second node; :meth:`stop` ends both."""

    hidden: Path
    port: int = field(default_factory=free_port)
    token: str = field(default_factory=lambda: secrets.token_hex(32))
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="rr", dir="/tmp")))
    auth: bool = True
    """Whether the cluster runs with token authentication (False: a cluster to refuse)."""
    head: subprocess.Popen[bytes] | None = None
    node2: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def env(self, *, token: bool = True) -> dict[str, str]:
        """The environment of a process of this cluster (with or without the token)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        env["RAY_USAGE_STATS_ENABLED"] = "0"
        if token:
            env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=self.token)
        else:
            env["RAY_AUTH_MODE"] = "disabled"
        return env

    def start(self, *, node2: bool = True) -> None:
        """Start the head and (``node2``) the second node; wait until they are registered."""
        self.head = self._spawn(
            [
                str(RAY), "start", "--head", "--block", f"--port={self.port}",
                "--num-cpus=1", "--node-ip-address=127.0.0.1", "--include-dashboard=false",
                f"--temp-dir={self.root / 'head'}", "--disable-usage-stats",
            ]
        )  # fmt: skip
        self.wait_for(1)
        if node2:
            self.start_node2()

    def start_node2(self) -> None:
        """(Re)start the second node in its own mount namespace; wait until it is up."""
        self.node2 = self.start_node({NODE2: 1}, "node2")
        self.wait_for(2)

    def start_node(
        self, resources: dict[str, int], name: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Start a node offering ``resources``, in its own mount namespace with ``hidden``
        covered, with ``env`` added to its environment; returns its ``ray start`` process
        (the caller waits for it with :meth:`wait_for`)."""
        script = (
            f"mount -t tmpfs -o size=1m,mode=0700 tmpfs {self.hidden} && exec {RAY} start "
            f"--block --address={self.address} --num-cpus=1 --node-ip-address=127.0.0.1 "
            f"--resources='{json.dumps(resources)}' --temp-dir={self.root / name} "
            "--disable-usage-stats"
        )
        argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]
        return self._spawn(argv, env)

    def wait_for(self, nodes: int, timeout_s: float = 90.0) -> None:
        """Block until ``nodes`` nodes are alive with their resources registered."""
        done = subprocess.run(
            [sys.executable, "-c", _WAIT, self.address, str(nodes), str(timeout_s)],
            env=self.env(token=self.auth),
            capture_output=True,
            text=True,
            timeout=timeout_s + 60,
            check=False,
        )
        if "ready" not in done.stdout:
            raise RuntimeError(
                f"the test Ray cluster did not get {nodes} node(s): {done.stderr[-2000:]}"
            )

    def raylet_of_node2(self) -> int:
        """The pid of the second node's raylet (a child of its ``ray start``)."""
        assert self.node2 is not None
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                comm = stat[stat.index("(") + 1 : stat.rindex(")")]
                ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
                if comm == "raylet" and ppid == self.node2.pid:
                    return int(entry.name)
        raise RuntimeError("the second node's raylet is not running")

    def kill_node2(self) -> None:
        """Kill the second node as a machine dies: SIGKILL its raylet, then every other
        process in its mount namespace (its Ray workers, and the jobs they run); then reap
        its ``ray start``. (Killing the raylet alone lets a worker finish the task it runs and
        hand the result to its owner before it notices.)"""
        assert self.node2 is not None
        namespace = os.readlink(f"/proc/{self.node2.pid}/ns/mnt")
        os.kill(self.raylet_of_node2(), signal.SIGKILL)
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if os.readlink(entry / "ns" / "mnt") == namespace:
                        os.kill(int(entry.name), signal.SIGKILL)
        self._stop(self.node2)
        self.node2 = None

    def stop(self) -> None:
        """End both nodes (their process groups), then any process left holding this
        cluster's token (Ray's workers run in sessions of their own), and remove the folders."""
        self._stop(self.node2)
        self._stop(self.head)
        self.node2 = self.head = None
        for pid in self._holding_token():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)

    def _holding_token(self) -> list[int]:
        """Processes other than this one whose environment holds this cluster's token."""
        mark = f"RAY_AUTH_TOKEN={self.token}".encode()
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != os.getpid():
                with contextlib.suppress(OSError):
                    if mark in (entry / "environ").read_bytes().split(b"\0"):
                        found.append(int(entry.name))
        return found

    def _spawn(self, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        self.root.mkdir(parents=True, exist_ok=True)
        log = (self.root / f"{len(list(self.root.glob('*.log')))}.log").open("wb")
        # Every node starts as one started in the background by a shell script would: with
        # SIGINT, SIGQUIT and SIGHUP ignored, which its Ray workers inherit.
        ignoring = ["env", "--ignore-signal=INT", "--ignore-signal=QUIT", "--ignore-signal=HUP"]
        with log:
            return subprocess.Popen(
                [*ignoring, *argv],
                env={**self.env(token=self.auth), **(env or {})},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @staticmethod
    def _stop(proc: subprocess.Popen[bytes] | None) -> None:
        """Stop a node: SIGTERM to its ``ray start --block`` (which stops its processes),
        then SIGKILL to its process group if it lingers."""
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # whatever it left in its group
