"""The layering rule of DESIGN.md: a module imports only from its own package or lower layers."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "rsilab"
LAYERS = {
    "cli": 1, "web": 1, "mcp": 1, "demo": 1, "__main__": 1,
    "orchestrator": 2,
    "agents": 3,
    "expos": 4,
    "controller": 5, "memory": 5,
    "executors": 6, "tasks": 6,
    "sandbox": 7, "store": 7,
    "stats": 7,  # pure statistics over numbers: they import only records (Interval) and errors
    "records": 8,
    "errors": 9,  # the root error types: everything may raise them, they import nothing
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
        assert own in LAYERS, f"{rel}: package {own!r} has no layer; add it to DESIGN.md"
        for name in _imports(path):
            other = _package(name)
            if other == own or LAYERS[own] == LAYERS[other] == 1:
                continue  # own package; the faces (cli, mcp, web) may serve one another
            if LAYERS[other] <= LAYERS[own]:
                problems.append(
                    f"{rel} (layer {LAYERS[own]}) imports {name} (layer {LAYERS[other]})"
                )
    assert not problems, "\n".join(problems)
