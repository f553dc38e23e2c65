"""The runtime environment: where it lives, what it holds, and what it must not hold."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rsilab.sandbox import runtime as rt
from rsilab.sandbox.runtime import Runtime, RuntimeInstallError


def test_requirements_start_with_pinned_torch() -> None:
    lines = rt.requirement_lines(rt.requirements_text())
    assert lines[0] == "torch==2.13.0"
    assert {"numpy", "safetensors"} <= {rt._name(line) for line in lines}
    assert not {"rsilab", "scikit-learn", "sklearn"} & {rt._name(line) for line in lines}


def test_requirement_lines_drop_comments_and_blanks() -> None:
    text = "# comment\n\ntorch==2.13.0  # pinned\nnumpy>=1.26\nweights==1  # rsilab: no-deps\n"
    assert rt.requirement_lines(text) == ["torch==2.13.0", "numpy>=1.26", "weights==1"]
    assert rt.requirement_lines(text, no_deps=True) == ["weights==1"]
    assert rt.requirement_lines(text, no_deps=False) == ["torch==2.13.0", "numpy>=1.26"]


def test_location_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RSILAB_RUNTIME", str(tmp_path / "rt"))
    assert rt.runtime_path() == tmp_path / "rt"
    monkeypatch.delenv("RSILAB_RUNTIME")
    assert rt.runtime_path().name == f"runtime-{rt.runtime_key()}"


def test_the_key_changes_with_the_requirements() -> None:
    assert rt.runtime_key("torch==2.13.0\n") != rt.runtime_key("torch==2.13.0\nnumpy\n")
    assert len(rt.runtime_key()) == 12


def test_a_folder_without_a_current_stamp_is_not_installed(tmp_path: Path) -> None:
    runtime = Runtime(tmp_path)
    assert not runtime.is_installed() and runtime.stamp() is None
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(sys.executable)
    stamp = {"key": "stale", "base_prefix": sys.base_prefix}
    (tmp_path / rt.STAMP_NAME).write_text(json.dumps(stamp))
    assert not runtime.is_installed(), "a stamp for other requirements does not count"
    stamp["key"] = rt.runtime_key()
    (tmp_path / rt.STAMP_NAME).write_text(json.dumps(stamp))
    assert not runtime.is_installed(), "a runtime without the stripped stdlib is not finished"
    (tmp_path / rt.STDLIB_DIR).mkdir()
    (tmp_path / rt.STDLIB_DIR / "os.pyc").write_bytes(b"")
    stamp["stdlib"] = rt.STDLIB_FORMAT - 1
    (tmp_path / rt.STAMP_NAME).write_text(json.dumps(stamp))
    assert not runtime.is_installed(), "a stripped stdlib of an older format is rebuilt"
    stamp["stdlib"] = rt.STDLIB_FORMAT
    (tmp_path / rt.STAMP_NAME).write_text(json.dumps(stamp))
    assert runtime.is_installed()
    with pytest.raises(RuntimeInstallError):
        Runtime(tmp_path / "none").base_prefix()


def test_a_failing_step_reports_its_output() -> None:
    with pytest.raises(RuntimeInstallError, match="boom") as caught:
        rt._run([sys.executable, "-c", "print('boom'); raise SystemExit(3)"], "a step")
    assert "exit 3" in caught.value.message and "--force" in caught.value.hint


def test_the_installed_runtime_holds_torch_and_not_rsilab() -> None:
    runtime = rt.current_runtime()
    if not runtime.is_installed():
        pytest.skip("the runtime is not installed (make install does it)")
    names = {name.lower() for name, _ in runtime.packages()}
    assert {"torch", "numpy", "safetensors"} <= names
    assert not {"rsilab", "scikit-learn"} & names
    logged: list[str] = []
    assert rt.install_runtime(log=logged.append) == runtime
    assert logged == [f"runtime already installed at {runtime.path}"]


def test_the_stripped_stdlib_has_no_source_and_no_docstrings() -> None:
    runtime = rt.current_runtime()
    if not runtime.is_installed():
        pytest.skip("the runtime is not installed (make install does it)")
    stdlib = runtime.stdlib
    assert not list(stdlib.rglob("*.py")) and (stdlib / "json" / "__init__.pyc").is_file()
    assert not {"test", "idlelib", "tkinter", "__pycache__"} & {p.name for p in stdlib.rglob("*")}
    assert list(stdlib.glob("lib-dynload/*.so")) and not list((stdlib / "site-packages").iterdir())
    assert not {"pip", "setuptools"} & {name.lower() for name, _ in runtime.packages()}
