"""Improve a system through the Experiment OS, searching its config with this harness's policy.

The harness's ``improve`` entry point: it runs inside the sandbox as a campaign Worker whose
only way out is the Experiment OS over MCP: ``rsilab agent --campaign C -- python improve.py``,
or ``rsilab evolve`` in each round. Standard library only: it starts the stdio bridge named by
``$RSILAB_MCP_COMMAND`` and speaks JSON-RPC lines.

The search is policy.py set by *this* harness's config.json, read before anything else (the
workspace may be this very folder, and prepare_workspace replaces it). What it searches is the
workspace's config (harness.toml's ``config``, default config.json); its knobs come from a tool
that lists them where the Experiment OS has one (:data:`KNOB_TOOLS`), else from the workspace's
space.json, else they are guessed from the config's values (:func:`guess_space`). Each
evaluation is one experiment: write the config, create_experiment, run_job train then
dev_eval with that model (fold_eval where the setting returns no dev scores),
finish_experiment; its value is the mean score of the target benchmarks (higher is better),
and a re-evaluation of a config uses the next seed. At the end the best config's experiment
is restored (prepare_workspace from_experiment) and proposed, unless nothing beat the start.

Usage: ``python improve.py [--evaluations N] [--direction ID] [--seed N] [--no-propose]
[--verdict-wait S]`` (``--seed`` defaults to ``$RSILAB_SEED``, which ``rsilab evolve`` sets to
the round's seed, else 0). Prints one JSON line: experiments run, the best config, its mean
dev score and the controller's verdict.
"""

import argparse
import json
import os
import random
import shlex
import subprocess
import sys
import time
import tomllib
from pathlib import Path

from policy import Search, Space

HERE = Path(__file__).resolve().parent
KNOB_TOOLS = ("search_space", "list_knobs")
"""Tools that list the task's knobs (``{"knobs": [...]}``), used when the server has one."""
PROTOCOL = "2025-06-18"


class ToolFailed(RuntimeError):
    """A tool call answered with an error (the message is the server's payload)."""


class StopSearch(RuntimeError):
    """No more experiments can be made (the campaign's budget is spent, or it is closed)."""


class Client:
    """A minimal MCP client over a child's stdio: JSON-RPC, one message a line."""

    def __init__(self, argv):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.next_id = 0

    def _send(self, message):
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def request(self, method, params):
        self.next_id += 1
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise ToolFailed(f"{method}: the MCP server closed the connection")
            message = json.loads(line)
            if message.get("id") != self.next_id:
                continue  # a notification or a server request: nothing this client needs
            if "error" in message:
                raise ToolFailed(f"{method}: {message['error'].get('message')}")
            return message["result"]

    def start(self):
        """The MCP handshake; the names of the tools this role may call."""
        info = {"name": "rsilab-policy-improve", "version": "1"}
        self.request(
            "initialize", {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": info}
        )
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return {tool["name"] for tool in self.request("tools/list", {})["tools"]}

    def call(self, name, arguments):
        """The tool's JSON value; ToolFailed when the tool answers with an error."""
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        value = result.get("structuredContent")
        if value is None:
            texts = [
                c.get("text", "") for c in result.get("content", []) if c.get("type") == "text"
            ]
            value = json.loads(texts[0]) if texts else {}
        if result.get("isError"):
            raise ToolFailed(f"{name}: {json.dumps(value)}")
        return value

    def close(self):
        self.proc.stdin.close()
        return self.proc.wait()


# --- the search space -----------------------------------------------------------------------


def guess_space(config):
    """Knobs guessed from a config's values: a bool flips; a positive number moves on a log
    scale (a share in (0, 1) up to 1, a larger number tenfold either way); zero moves in
    [0, 1] (an int in [0, 10]); text and other values stay fixed."""
    knobs = []
    for name, value in config.items():
        if isinstance(value, bool):
            knobs.append({"name": name, "type": "bool"})
        elif isinstance(value, int) and value > 0:
            knobs.append(
                {
                    "name": name,
                    "type": "int",
                    "low": max(1, value // 10),
                    "high": value * 10,
                    "log": True,
                }
            )
        elif isinstance(value, int) and value == 0:
            knobs.append({"name": name, "type": "int", "low": 0, "high": 10})
        elif isinstance(value, float) and 0 < value < 1:
            knobs.append(
                {"name": name, "type": "float", "low": value / 100, "high": 1.0, "log": True}
            )
        elif isinstance(value, float) and value >= 1:
            knobs.append(
                {"name": name, "type": "float", "low": value / 10, "high": value * 10, "log": True}
            )
        elif isinstance(value, float) and value == 0:
            knobs.append({"name": name, "type": "float", "low": 0.0, "high": 1.0})
    return knobs


def knobs_of(client, tools, workspace, config):
    """The knobs to search and where they came from (a tool, space.json, or a guess)."""
    for name in KNOB_TOOLS:
        if name in tools:
            listed = client.call(name, {}).get("knobs")
            if listed:
                return [k for k in listed if k.get("name") in config], f"tool {name}"
    declared = workspace / "space.json"
    if declared.is_file():
        knobs = json.loads(declared.read_text())["knobs"]
        return [k for k in knobs if k.get("name") in config], "space.json"
    return guess_space(config), "guessed from the config"


def config_file(workspace):
    """The workspace's config file, as its harness.toml names it."""
    manifest = tomllib.loads((workspace / "harness.toml").read_text()).get("harness", {})
    return manifest.get("config") or "config.json"


# --- one evaluation = one experiment --------------------------------------------------------


class Research:
    """Evaluates configs as recorded experiments of one direction."""

    def __init__(self, client, direction, targets, kind, config_name, seed):
        self.client, self.direction, self.targets = client, direction, targets
        self.kind, self.config_name, self.seed = kind, config_name, seed
        self.experiments = []  # (experiment id, config, score or None)

    def evaluate(self, config):
        """The mean target score of ``config`` on a fresh seed (-inf when a job failed)."""
        text = json.dumps(config, indent=2) + "\n"
        number = len(self.experiments) + 1
        try:
            self.client.call("write_file", {"path": self.config_name, "content": text})
            made = self.client.call(
                "create_experiment",
                {
                    "direction_id": self.direction,
                    "description": f"policy search, evaluation {number}",
                    "config": config,
                },
            )
        except ToolFailed as exc:
            raise StopSearch(str(exc)) from None
        experiment = made["id"]
        try:
            score = self._measure(experiment, self.seed + number)
        except ToolFailed as exc:
            print(f"improve: evaluation {number} failed: {exc}", file=sys.stderr)
            score = None
        status = "failed" if score is None else "succeeded"
        summary = "no score" if score is None else f"mean target score {score:.4f}"
        self.client.call(
            "finish_experiment", {"experiment_id": experiment, "status": status, "summary": summary}
        )
        self.experiments.append((experiment, config, score))
        return -float("inf") if score is None else score

    def _measure(self, experiment, seed):
        run = {"experiment_id": experiment, "seed": seed}
        if self.kind == "fold_eval":
            scores = self.client.call("run_job", {**run, "kind": "fold_eval"}).get(
                "fold_scores", {}
            )
        else:
            trained = self.client.call("run_job", {**run, "kind": "train"})
            if trained.get("status") != "succeeded" or not trained.get("model"):
                return None
            scores = self.client.call(
                "run_job", {**run, "kind": "dev_eval", "model": trained["model"]}
            )
            scores = scores.get("dev", {})
        values = [scores.get("scores", {}).get(t) for t in self.targets]
        values = [v for v in values if isinstance(v, (int, float))]
        return sum(values) / len(values) if values else None

    def last_experiment_of(self, config):
        """The latest succeeded experiment that ran ``config``, or None."""
        for experiment, ran, score in reversed(self.experiments):
            if ran == config and score is not None:
                return experiment
        return None

    def mean_score(self, config):
        """The mean of ``config``'s scores over its experiments, or None."""
        scores = [s for _, ran, s in self.experiments if ran == config and s is not None]
        return sum(scores) / len(scores) if scores else None


def search(research, space, start, settings, evaluations, rng):
    """Run the policy for up to ``evaluations`` experiments; the best config."""
    policy = Search(space, start, settings, rng)
    for _ in range(evaluations):
        config = policy.ask()
        try:
            value = research.evaluate(config)
        except StopSearch as exc:
            print(f"improve: stopping: {exc}", file=sys.stderr)
            break
        policy.tell(config, value)
    return policy.best


# --- the whole loop -------------------------------------------------------------------------


def pick_direction(client, given):
    """The direction to work in: the one given, else the campaign's first open one."""
    if given:
        return given
    for direction in client.call("list_directions", {}).get("directions", []):
        if direction.get("state") in ("open", "promising"):
            return direction["id"]
    raise SystemExit(
        "improve: no open direction in this campaign; ask for one, or pass --direction"
    )


def verdict_of(client, proposed, wait_s):
    """The controller's verdict, waiting up to ``wait_s`` for a pending one."""
    deadline = time.monotonic() + wait_s
    status = proposed
    while status.get("verdict") == "pending" and time.monotonic() < deadline:
        time.sleep(1.0)
        status = client.call("candidate_status", {"candidate_id": proposed["candidate_id"]})
    return status.get("outcome") or status.get("verdict")


def improve(client, args, settings, workspace):
    """Prepare, search, propose; the report."""
    tools = client.start()
    prepared = client.call("prepare_workspace", {"overwrite": True})
    targets = [b["name"] for b in prepared["benchmarks"] if b.get("target")]
    kind = "dev_eval" if prepared.get("dev_scores_returned") else "fold_eval"
    config_name = config_file(workspace)
    start = json.loads((workspace / config_name).read_text())
    knobs, source = knobs_of(client, tools, workspace, start)
    direction = pick_direction(client, args.direction)
    research = Research(client, direction, targets, kind, config_name, args.seed)
    space = Space(knobs, start)
    origin = space.decode(space.encode(start))
    best = search(research, space, origin, settings, args.evaluations, random.Random(args.seed))
    report = {
        "knobs": source,
        "experiments": [e for e, _, _ in research.experiments],
        "start_score": research.mean_score(origin),
        "best": best,
        "best_score": research.mean_score(best),
        "verdict": None,
    }
    experiment = research.last_experiment_of(best)
    if args.propose and experiment is not None and best != origin:
        client.call("prepare_workspace", {"from_experiment": experiment, "overwrite": True})
        proposed = client.call(
            "propose_candidate",
            {"experiment_id": experiment, "base_version_id": prepared["base_version_id"]},
        )
        report["candidate_id"] = proposed["candidate_id"]
        report["verdict"] = verdict_of(client, proposed, args.verdict_wait)
    return report


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaluations", type=int, default=12, help="experiments to run at most")
    parser.add_argument("--direction", default="", help="direction id (default: the first open)")
    seed = int(os.environ.get("RSILAB_SEED", "0"))  # rsilab evolve: the round's seed
    parser.add_argument("--seed", type=int, default=seed, help="seeds the policy and the jobs")
    parser.add_argument("--no-propose", dest="propose", action="store_false")
    parser.add_argument("--verdict-wait", type=float, default=600.0, help="seconds to wait for it")
    args = parser.parse_args(argv)
    settings = json.loads((HERE / "config.json").read_text())  # before the workspace changes
    workspace = Path(os.environ.get("RSILAB_WORKSPACE", "."))
    client = Client(shlex.split(os.environ["RSILAB_MCP_COMMAND"]))
    try:
        report = improve(client, args, settings, workspace)
    finally:
        client.close()
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
