"""An "external agent" for the ``rsilab agent`` tests: runs INSIDE the sandbox (stdlib only).

It starts ``$RSILAB_MCP_COMMAND`` the way an agent's MCP client starts a stdio server, speaks
plain JSON-RPC lines to it, probes what else it can reach, prints one JSON report on stdout
and exits with the status given as its last argument.

Usage: ``python -c SOURCE PORT EXIT_STATUS HOST_PATH...``: PORT is a TCP port the test listens
on at 127.0.0.1; each HOST_PATH is a host path that must not be visible.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
from typing import Any


class Client:
    """A minimal MCP client over a child's stdio."""

    def __init__(self, command: list[str]) -> None:
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.next_id = 0

    def notify(self, method: str) -> None:
        self.send({"jsonrpc": "2.0", "method": method})

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit("the MCP server closed the connection")
            message: dict[str, Any] = json.loads(line)
            if message.get("id") == self.next_id:
                return message

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        answer = self.request("tools/call", {"name": name, "arguments": arguments})
        result: dict[str, Any] = answer["result"]
        return result

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait()


def network(port: int) -> str:
    """What connecting to the host's listener gives: 'connected' or the error."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            return "connected"
    except OSError as exc:
        return f"{type(exc).__name__}: {exc.strerror or exc}"


def main(argv: list[str]) -> int:
    port, status, paths = int(argv[1]), int(argv[2]), argv[3:]
    client = Client(shlex.split(os.environ["RSILAB_MCP_COMMAND"]))
    init = client.request(
        "initialize",
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "agent-client", "version": "0"},
        },
    )
    client.notify("notifications/initialized")
    tools = client.request("tools/list", {})["result"]["tools"]
    written = client.call("write_file", {"path": "notes.txt", "content": "from the agent"})
    listed = client.call("list_files", {})
    refused = client.call("create_direction", {"title": "t", "hypothesis": "h"})
    with open(os.path.join(os.environ["RSILAB_WORKSPACE"], "notes.txt")) as handle:
        seen_in_workspace = handle.read()
    with open(os.environ["RSILAB_MCP_CONFIG"]) as handle:
        config = json.load(handle)
    report = {
        "server": init["result"]["serverInfo"]["name"],
        "tools": [t["name"] for t in tools],
        "written": written,
        "listed": listed,
        "refused": refused,
        "seen_in_workspace": seen_in_workspace,
        "config": config,
        "visible": {path: os.path.exists(path) for path in paths},
        "network": network(port),
        "uid": os.getuid(),
        "cwd": os.getcwd(),
        "workspace_entries": sorted(os.listdir(".")),
        "bridge_exit": client.close(),
    }
    print(json.dumps(report))
    print("agent stderr line", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
