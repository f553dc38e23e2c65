"""`rsilab runtime adopt PYTHON`: an existing interpreter becomes the runtime, or is refused in
one line; jobs then run in it inside bubblewrap, and a task's build step runs with it."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from rsilab.sandbox import BwrapSandbox
from rsilab.sandbox.base import Limits, RunSpec
from rsilab.sandbox.runtime import Runtime
from rsilab.sandbox.runtime_adopt import AdoptRefused, acceptable, adopt_runtime, check_probe
from rsilab.sandbox.runtime_built import BuiltFileChanged, built_files, verify_built
from rsilab.tasks import get_task

LM = ["transformers==5.24.0", "tokenizers==0.23.3", "peft==0.21.2"]


@pytest.mark.parametrize(
    ("line", "found", "ok"),
    [
        ("torch==2.13.0", "2.5.1+cu121", True),  # any 2.x build, CUDA allowed
        ("torch==2.13.0", "2.13.0+cpu", True),
        ("torch==2.13.0", "1.13.1", False),
        ("torch==2.13.0", "3.0.0", False),
        ("transformers==5.24.0", "5.24.0", True),
        ("transformers==5.24.0", "5.24.0+local", True),
        ("transformers==5.24.0", "5.23.0", False),
        ("numpy>=1.26", "2.4.6", True),
        ("numpy>=1.26", "1.25.2", False),
        ("numpy<3", "2.0.0", False),  # only == and >= lines can be checked
    ],
)
def test_what_adoption_accepts(line: str, found: str, ok: bool) -> None:
    assert acceptable(line, found) is ok


def test_another_python_version_is_named() -> None:
    probe = {"version": [3, 99], "found": {"numpy": {"version": "2.0.0", "error": ""}}}
    problems = check_probe(probe, ["numpy>=1.26"])
    assert problems == [
        f"it is Python 3.99, rsilab runs {sys.version_info[0]}.{sys.version_info[1]}"
    ]


def test_a_package_that_does_not_import_is_named() -> None:
    here = list(sys.version_info[:2])
    probe = {"version": here, "found": {"peft": {"version": "0.21.2", "error": "import peft: X"}}}
    assert check_probe(probe, ["peft==0.21.2"]) == ["peft does not import (import peft: X)"]


def _task_python() -> Path:
    runtime = get_task("posttrain").runtime()
    if not runtime.is_installed():
        pytest.skip(
            "posttrain's runtime is not installed (rsilab runtime install --task posttrain)"
        )
    return runtime.python


def build_note(folder: Path, log: Callable[[str], None]) -> dict[str, str]:
    """A build step for the test: run by the adopted interpreter, it records which one."""
    import tokenizers  # the runtime's own package: the step runs in the adopted interpreter

    out = folder / "share" / "note.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(f"{sys.prefix} {tokenizers.__version__}\n")
    log("wrote the note")
    return {"note": str(out), "note_sha256": hashlib.sha256(out.read_bytes()).hexdigest()}


def test_an_interpreter_with_every_requirement_is_adopted_and_jobs_run_in_it(
    tmp_path: Path,
) -> None:
    python = _task_python()
    path = tmp_path / "adopted"
    made = adopt_runtime(python, extra=LM, build=build_note, path=path, log=lambda _: None)
    runtime = Runtime(path, tuple(LM), build_id="")
    assert runtime.is_installed(), "the stamp makes it an installed runtime of these lines"
    stamp = runtime.stamp() or {}
    assert stamp["adopted"] == str(python)
    assert stamp["accepted"]["transformers"] == "5.24.0"
    note = path / "share" / "note.txt"
    assert note.read_text() == f"{path} 0.23.3\n", "the build ran in the adopted runtime"
    assert [f.name for f in built_files(made)] == ["note"]
    verify_built(runtime, "t")
    box = BwrapSandbox(runtime)
    box.prepare()
    try:
        with box.scratch(64) as ws:
            code = (
                "import os, sys, peft, transformers\n"
                "print(sys.prefix, transformers.__version__, os.environ['HF_HUB_OFFLINE'])\n"
                "try:\n    import rsilab\nexcept ImportError:\n    print('no rsilab')\n"
            )
            limits = Limits(wall_s=120, cpu_s=120, memory_mb=2048)
            result = box.run(RunSpec(argv=("python", "-c", code), workspace=ws, limits=limits))
    finally:
        box.close()
    assert result.stdout.decode().split("\n")[:2] == [f"{path} 5.24.0 1", "no rsilab"]
    note.write_text("changed after the install\n")
    with pytest.raises(BuiltFileChanged, match="changed since its runtime was installed"):
        verify_built(runtime, "t")


def test_an_interpreter_lacking_a_package_is_refused_in_one_line(tmp_path: Path) -> None:
    bare = tmp_path / "bare"  # a venv of the same Python with nothing installed
    base = Path(sys.base_prefix) / "bin" / "python3"
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(bare)], check=True)
    done = subprocess.run(
        [sys.executable, "-m", "rsilab", "runtime", "adopt", str(bare / "bin" / "python")],
        capture_output=True,
        text=True,
        env={"RSILAB_RUNTIME": str(tmp_path / "rt"), "PATH": "/usr/bin:/bin", "HOME": "/root"},
        check=False,
    )
    assert done.returncode != 0
    error = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "cannot be the runtime: torch is missing" in error[0], done.stderr
    assert not (tmp_path / "rt").exists(), "nothing is made for a refused interpreter"


def test_a_runtime_already_there_is_kept_without_force(tmp_path: Path) -> None:
    python = _task_python()
    (tmp_path / "rt").mkdir()
    with pytest.raises(AdoptRefused, match="already at"):
        adopt_runtime(python, extra=LM, path=tmp_path / "rt", log=lambda _: None)
    assert json.dumps(sorted(p.name for p in (tmp_path / "rt").iterdir())) == "[]"


@pytest.mark.parametrize(
    ("answer", "lacking"),
    [
        ('{"version": [3, 12]}', "base_prefix, base_executable, sites, found, rsilab"),
        ("[1, 2]", "version, base_prefix, base_executable, sites, found, rsilab"),
        ('{"version": ["3", 11], "base_prefix": "/", "base_executable": "/bin/sh", '
         '"sites": [], "found": {"torch": 2}, "rsilab": false}', "version, found"),
    ],
)  # fmt: skip
def test_an_answer_that_is_not_the_probes_is_refused_in_one_line(
    tmp_path: Path, answer: str, lacking: str
) -> None:
    """Before, a wrapper printing part of the answer ended in a KeyError ("a bug in rsilab")."""
    liar = tmp_path / "python"
    liar.write_text(f"#!/bin/sh\necho '{answer}'\n")
    liar.chmod(0o755)
    with pytest.raises(AdoptRefused) as caught:
        adopt_runtime(liar, extra=LM, path=tmp_path / "rt", log=lambda _: None)
    assert caught.value.message == f"{liar} did not answer the probe: its answer lacks {lacking}"
    assert not (tmp_path / "rt").exists()
