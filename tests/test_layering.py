"""The layering rule of docs/architecture.md: a module imports only from its own package or
lower layers."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "rsilab"
LAYERS = {
    "cli": 1, "web": 1, "mcp": 1, "demo": 1, "__main__": 1,
    "export": 1,  # copies of a campaign's records in other tools (MLflow): a face
    "orchestrator": 2,
    "agents": 3,
    "expos": 4,
    "controller": 5, "memory": 5,
    "executors": 6, "tasks": 6,
    "sandbox": 7, "store": 7,
    "stats": 7,  # pure statistics over numbers: they import only records (Interval) and errors
    "records": 8,
    "errors": 9,  # the root error types: everything may raise them, they import nothing
    "faults": 9,  # named fault points for the chaos benchmark: they import nothing
}  # fmt: skip


def _package(module: str) -> str:
    return module.split(".")[1] if module.count(".") >= 1 else ""


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text("utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
    return [name for name in found if name.startswith("rsilab.")]


def test_no_module_imports_upwards() -> None:
    problems = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        if rel.parts[0] == "__init__.py" or "harness" in rel.parts:
            continue  # the package root re-exports; harness folders run in the sandbox
        own = rel.parts[0].removesuffix(".py")
        assert own in LAYERS, f"{rel}: package {own!r} has no layer; add it to docs/architecture.md"
        for name in _imports(path):
            other = _package(name)
            if other == own or LAYERS[own] == LAYERS[other] == 1:
                continue  # own package; the faces (cli, mcp, web) may serve one another
            if LAYERS[other] <= LAYERS[own]:
                problems.append(
                    f"{rel} (layer {LAYERS[own]}) imports {name} (layer {LAYERS[other]})"
                )
    assert not problems, "\n".join(problems)


ORCHESTRATOR = {
    "writer": 0, "door": 0,  # its one way to write, its agents' one way to act
    "research": 1,  # the DAG, measures, guidance, a team's campaign review
    "campaign": 2,  # the lifecycle every run goes through
    "builtin": 3, "llm": 3,  # the policies: who decides (neither imports the other)
    "rounds": 4, "report": 4,
    "api": 5,  # rsilab.run and rsilab.resume
}  # fmt: skip
"""The orchestrator's subpackages, bottom up: each imports only lower ones and its own."""


def test_the_orchestrator_subpackages_import_only_downwards() -> None:
    root = SRC / "orchestrator"
    problems = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts == ("__init__.py",):
            continue  # the package's face re-exports
        own = rel.parts[0].removesuffix(".py")
        assert own in ORCHESTRATOR, f"orchestrator/{rel}: {own!r} has no place; add it here"
        for name in _imports(path):
            parts = name.split(".")
            if parts[:2] != ["rsilab", "orchestrator"] or len(parts) < 3:
                continue
            other = parts[2]
            if other != own and ORCHESTRATOR[other] >= ORCHESTRATOR[own]:
                problems.append(f"orchestrator/{rel} imports {name}")
    assert not problems, "\n".join(problems)
