"""The stdlib a job sees: under bwrap a compiled copy without sources or docstrings (tasks
build data from them); the process sandbox, no boundary, shows the real one unchanged."""

from __future__ import annotations

import json
import sysconfig
from dataclasses import replace
from pathlib import Path

from rsilab.sandbox import Sandbox
from tests.sandbox.helpers import py

_PROBE = """
import json, os, sys, argparse
source = sys.argv[1]
try:
    with open(source) as handle:
        readable = bool(handle.read(100))
except OSError:
    readable = False
stdlib = os.path.dirname(source)
sources = [
    os.path.join(folder, name)
    for folder, _, names in os.walk(os.path.dirname(stdlib))
    for name in names
    if name.endswith(".py")
]
print(json.dumps({"doc": json.__doc__, "readable": readable, "sources": len(sources)}))
"""


def test_stdlib_sources_and_docstrings(sandbox: Sandbox, workspace: Path) -> None:
    source = Path(sysconfig.get_paths()["stdlib"]) / "json" / "__init__.py"
    assert source.is_file() and json.__doc__, "the host's stdlib has its source"
    spec = py(workspace, _PROBE)
    result = sandbox.run(replace(spec, argv=(*spec.argv, str(source))))
    assert result.ok, result
    seen = json.loads(result.stdout)
    if sandbox.is_security_boundary:
        assert seen == {"doc": None, "readable": False, "sources": 0}, seen
    else:
        assert seen["doc"] == json.__doc__ and seen["readable"] and seen["sources"] > 100


def test_the_harness_libraries_still_import(sandbox: Sandbox, workspace: Path) -> None:
    code = (
        "import json, os, re, torch, numpy, safetensors, argparse, sys;"
        " print(json.dumps([re.sub('a', 'b', 'a'), int(torch.ones(2).sum()), sys.flags.optimize]))"
    )
    result = sandbox.run(py(workspace, code))
    assert result.ok, result
    assert json.loads(result.stdout) == ["b", 2, 0], "no -O flag: only the stdlib is stripped"
