"""The campaign lifecycle has one home: its parts are reached only through it, records are
written only at named places, and each caller makes one call into it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SRC = ROOT / "src" / "rsilab"
LIFECYCLE = "orchestrator/campaign/lifecycle.py"


def _modules() -> dict[str, ast.Module]:
    return {
        str(p.relative_to(SRC)): ast.parse(p.read_text("utf-8"))
        for p in sorted(SRC.rglob("*.py"))
        if "harness" not in p.parts
    }


def _imported(tree: ast.Module) -> set[str]:
    """Modules a file imports, with ``from package import module`` counted as the module."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def test_lease_recovery_intents_and_budget_are_imported_by_the_lifecycle_alone() -> None:
    parts = [
        "rsilab.orchestrator.campaign._lease",
        "rsilab.orchestrator.campaign._recovery",
        "rsilab.orchestrator.campaign._intents",
        "rsilab.orchestrator.campaign._budget",
    ]
    modules = _modules()
    for part in parts:
        importers = sorted(f for f, tree in modules.items() if part in _imported(tree))
        assert importers == [LIFECYCLE], (part, importers)


def test_only_the_lifecycle_ends_a_campaign() -> None:
    """The ending function is named nowhere else, and no other module writes the
    ``campaign_<state>`` event that records an end."""
    for name, tree in _modules().items():
        if name == LIFECYCLE:
            continue
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        assert "_end_campaign" not in names, name
        texts = [
            v.value
            for n in ast.walk(tree)
            if isinstance(n, ast.JoinedStr)
            for v in n.values
            if isinstance(v, ast.Constant)
        ]
        assert "campaign_" not in texts, f"{name} builds a campaign_<state> action"


ALLOWED_COMMITS = {
    ("agents/loop.py", "_commit"),
    ("agents/roles/_orientations.py", "seed_orientations"),
    ("controller/comparison.py", "_store"),  # the head measured on more seeds (issue 23)
    ("controller/gc.py", "_commit_tombstones"),
    ("controller/host.py", "_commit"),
    ("controller/jobs.py", "_commit"),
    ("controller/lineage.py", "rollback"),
    ("controller/recovery.py", "_commit"),
    ("expos/campaigns.py", "open_campaign"),
    ("expos/dispatch.py", "_record"),
    ("expos/dispatch.py", "_record_failure"),
    ("expos/dispatch.py", "refused_message"),  # an MCP message the wire refused
    ("mcp/agent_ledger.py", "_record"),
    ("mcp/tokens.py", "_commit"),  # bearer tokens for MCP over HTTP, and their refusals
    ("memory/builtin_skills.py", "ensure_builtin_skills"),
    ("memory/revisions.py", "_commit"),
    ("orchestrator/writer.py", "write"),
    ("store/lab.py", "init"),
    ("store/secret.py", "record_secret"),  # the task secret's fingerprint, on its first use
}
"""(file, function) of every ``.commit(`` in src/: the tools' dispatcher, the controller's
services, the orchestrator's writer, and the few named writers of seeds and lab set-up."""


def _commit_sites(tree: ast.Module) -> set[str]:
    sites: set[str] = set()

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = function
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = child.name
            if (
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Attribute)
                and child.func.attr == "commit"
            ):
                sites.add(function)
            visit(child, name)

    visit(tree, "<module>")
    return sites


def test_records_are_committed_only_at_named_places() -> None:
    found = {(f, s) for f, tree in _modules().items() for s in _commit_sites(tree)}
    assert found - ALLOWED_COMMITS == set(), "a new .commit( site: write through a named service"
    assert ALLOWED_COMMITS - found == set(), "an allowed site is gone: drop it from the list"


def _calls(path: Path, name: str) -> int:
    tree = ast.parse(path.read_text("utf-8"))
    return sum(
        1
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and (
            (isinstance(n.func, ast.Name) and n.func.id == name)
            or (isinstance(n.func, ast.Attribute) and n.func.attr == name)
        )
    )


def test_each_caller_makes_one_call_into_the_lifecycle() -> None:
    assert _calls(SRC / "orchestrator" / "rounds" / "evolution.py", "run_policy") == 1
    peers = ast.parse((ROOT / "benchmarks" / "search" / "protocol.py").read_text("utf-8"))
    into = [
        n
        for n in ast.walk(peers)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "run_policy"
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == "lifecycle"
    ]
    assert len(into) == 1  # the peers' (the built-in runs go through run_campaign)
    assert _calls(SRC / "orchestrator" / "api.py", "run_policy") == 2  # run, resume
    run_cli = SRC / "cli" / "run.py"
    assert _calls(run_cli, "run_campaign") == 1 and _calls(run_cli, "resume_campaign") == 1
    orchestrator = {
        m for m in _imported(ast.parse(run_cli.read_text("utf-8"))) if ".orchestrator" in m
    }
    assert {m.rsplit(".", 1)[0] for m in orchestrator if m.count(".") > 2} <= {
        "rsilab.orchestrator.api",
        "rsilab.orchestrator.campaign",
        "rsilab.orchestrator.report",
    }
