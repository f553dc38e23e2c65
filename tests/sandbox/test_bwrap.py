"""What only BwrapSandbox does: mounts elsewhere, hidden paths, owned workspaces, cgroups."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rsilab.sandbox import BwrapSandbox, Mount, RunSpec, hand_over
from rsilab.sandbox._cgroup import probe
from rsilab.sandbox.base import SandboxError, SandboxUnavailable
from rsilab.sandbox.runtime import (
    STAMP_NAME,
    STDLIB_DIR,
    STDLIB_FORMAT,
    Runtime,
    build_stdlib,
    current_runtime,
    runtime_key,
)
from tests.sandbox.helpers import QUICK, bwrap_problem, py

pytestmark = pytest.mark.skipif(
    bwrap_problem() is not None, reason=f"bubblewrap is unusable here ({bwrap_problem()})"
)


@pytest.fixture(scope="module")
def bwrap() -> Iterator[BwrapSandbox]:
    with BwrapSandbox() as sandbox:
        assert isinstance(sandbox, BwrapSandbox)
        yield sandbox


@pytest.fixture
def workspace(bwrap: BwrapSandbox) -> Iterator[Path]:
    with bwrap.scratch(QUICK.disk_mb, kind="test") as folder:
        yield folder


def test_describe_says_it_is_a_boundary(bwrap: BwrapSandbox) -> None:
    lines = bwrap.describe()
    assert bwrap.is_security_boundary
    assert "a security boundary" in lines[0]
    assert {line.split(":")[0] for line in lines[1:]} == {
        "filesystem",
        "network",
        "user",
        "limits",
        "disk",
        "cgroups",
    }


def test_a_mount_appears_at_its_target_read_only(
    bwrap: BwrapSandbox, workspace: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.jsonl").write_text('{"x": 1}\n')
    code = (
        "print(open('/data/train.jsonl').read().strip())\n"
        "try:\n    open('/data/new', 'w')\nexcept OSError as e:\n    print(type(e).__name__)"
    )
    result = bwrap.run(py(workspace, code, mounts=(Mount(data, Path("/data")),)))
    assert result.stdout.split() == [b'{"x":', b"1}", b"OSError"], result
    assert not (data / "new").exists()


def test_a_read_only_workspace_is_read_but_not_written(
    bwrap: BwrapSandbox, workspace: Path
) -> None:
    (workspace / "model.json").write_text("{}")
    (workspace / "model.json").chmod(0o600)  # as a job's umask may leave it
    hand_over(workspace)  # what host code writes into a workspace is the sandbox user's
    code = (
        "print(open('model.json').read())\n"
        "for path in ('model.json', 'new.txt'):\n"
        "    try:\n        open(path, 'a').write('x')\n"
        "    except OSError as e:\n        print(type(e).__name__)\n"
        "open('/tmp/scratch', 'w').write('ok')"
    )
    result = bwrap.run(py(workspace, code, read_only_workspace=True))
    assert result.ok, result
    assert result.stdout.split() == [b"{}", b"OSError", b"OSError"]
    assert (workspace / "model.json").read_text() == "{}"
    assert not (workspace / "new.txt").exists()
    assert (workspace / "model.json").stat().st_uid == bwrap.uid  # nothing changed owner


def test_a_writable_mount_must_be_a_workspace(
    bwrap: BwrapSandbox, workspace: Path, tmp_path: Path
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    code = "open('/shared/out.txt', 'w').write('done')"
    with pytest.raises(SandboxError, match="not a workspace of this sandbox"):
        bwrap.run(py(workspace, code, mounts=(Mount(plain, Path("/shared"), True),)))
    shared = bwrap.workspace(tmp_path / "shared")
    try:
        result = bwrap.run(py(workspace, code, mounts=(Mount(shared, Path("/shared"), True),)))
        assert result.ok, result
        assert (shared / "out.txt").read_text() == "done"
    finally:
        bwrap.release_workspace(shared)
    assert (shared / "out.txt").read_text() == "done", "released: the contents stay in place"
    assert (shared / "out.txt").stat().st_uid == shared.stat().st_uid == bwrap.uid


def test_mounts_cannot_cover_system_paths(bwrap: BwrapSandbox, workspace: Path) -> None:
    for target in ("/usr/lib/x", "/workspace/data", "/"):
        with pytest.raises(ValueError, match="system path"):
            bwrap.run(py(workspace, "pass", mounts=(Mount(workspace, Path(target)),)))


def test_hidden_paths_are_masked_inside_mounts(
    bwrap: BwrapSandbox, workspace: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    (data / "raw").mkdir(parents=True)
    (data / "raw" / "source.csv").write_text("secret rows")
    (data / "labels.csv").write_text("secret labels")
    (data / "public.txt").write_text("fine")
    code = (
        "import os\n"
        "try:\n    open(T + '/labels.csv').read(); print('read')\n"
        "except PermissionError: print('refused')\n"
        "print(os.listdir(os.path.join(T, 'raw')), open(T + '/public.txt').read())"
    ).replace("T", repr(str(data)))
    spec = py(
        workspace, code, mounts=(Mount.same(data),), hidden=(data / "raw", data / "labels.csv")
    )
    result = bwrap.run(spec)
    # a hidden file fails to open: never empty data a job could take for the real file
    assert result.stdout.split() == [b"refused", b"[]", b"fine"], result


def test_a_job_with_scikit_learn_cannot_load_the_digits_tasks_source(
    bwrap: BwrapSandbox, workspace: Path
) -> None:
    """The host's scikit-learn shown to a job (as a task runtime holding it would): the digits
    task hides the data its tiers are cut from, so neither the loader nor the file opens."""
    from rsilab.tasks.builtin.digits import digits

    sklearn = pytest.importorskip("sklearn")
    site = Path(sklearn.__file__).parent.parent
    [source] = digits().data_sources
    code = f"""
import sys
sys.path.insert(0, {str(site)!r})
try:
    from sklearn.datasets import load_digits
    load_digits(); print("loaded")
except PermissionError:
    print("loader refused")
try:
    open({str(source)!r}, "rb").read(); print("read")
except PermissionError:
    print("file refused")
"""
    result = bwrap.run(py(workspace, code, mounts=(Mount.same(site),), hidden=(source,)))
    assert result.stdout.split(b"\n")[:2] == [b"loader refused", b"file refused"], result


def test_the_base_pythons_packages_are_not_importable(bwrap: BwrapSandbox, workspace: Path) -> None:
    code = "import sys, numpy, torch; print([p for p in sys.path if 'site-packages' in p])"
    result = bwrap.run(py(workspace, code))
    assert result.ok, result
    assert str(bwrap.runtime.path).encode() in result.stdout
    assert b"/usr/lib/python3/dist-packages" not in result.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="a sandbox uid exists only as root")
def test_nothing_changes_owner_when_a_job_runs(bwrap: BwrapSandbox, workspace: Path) -> None:
    """Ownership is decided when the workspace is made, never lent for a run: a file the
    host left as its own stays so, and the job cannot take it."""
    (workspace / "host.txt").write_text("host")
    code = (
        "import os; open('mine', 'w').write('x');\n"
        "try:\n    os.chmod('host.txt', 0o666)\nexcept OSError as e:\n    print(e.errno)"
    )
    result = bwrap.run(py(workspace, code))
    assert result.stdout.strip() == b"1", result  # EPERM
    assert (workspace / "host.txt").stat().st_uid == 0
    assert (workspace / "mine").stat().st_uid == workspace.stat().st_uid == bwrap.uid
    assert bwrap.uid not in (0, 65534) and bwrap.uid >= 0x7000_0000


@pytest.mark.skipif(os.geteuid() != 0, reason="as root, jobs run as the sandbox uid")
def test_a_writable_job_outside_a_workspace_is_refused(bwrap: BwrapSandbox, tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="not a workspace of this sandbox") as caught:
        bwrap.run(py(tmp_path, "pass"))
    assert "\n" not in str(caught.value)
    assert bwrap.run(py(tmp_path, "pass", read_only_workspace=True)).ok


@pytest.mark.skipif(os.geteuid() != 0, reason="cgroups are made only as root")
def test_job_cgroups_are_removed(bwrap: BwrapSandbox, workspace: Path) -> None:
    assert bwrap.cgroups
    result = bwrap.run(py(workspace, "import os; os.fork() or os._exit(0)"))
    assert result.ok, result
    for parent in probe().parents.values():
        assert list(parent.glob(f"rsilab-job-{os.getpid()}-*")) == []


def test_a_missing_runtime_makes_it_unavailable(tmp_path: Path) -> None:
    sandbox = BwrapSandbox(Runtime(tmp_path / "no-runtime"))
    with pytest.raises(SandboxUnavailable, match="runtime") as caught:
        sandbox.prepare()
    assert "rsilab runtime install" in caught.value.hint


def test_a_workspace_holding_the_runtime_is_refused(bwrap: BwrapSandbox) -> None:
    with pytest.raises(ValueError):
        bwrap.run(RunSpec(argv=("true",), workspace=bwrap.runtime.path.parent))


def test_a_runtime_kept_under_tmp_stays_visible(tmp_path: Path) -> None:
    """The private /tmp must not cover a runtime (or Python) that lives under the host's /tmp."""
    venv = tmp_path / "runtime"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    base = os.path.realpath(sys.base_prefix)
    stamp = {"key": runtime_key(), "base_prefix": base, "stdlib": STDLIB_FORMAT}
    (venv / STAMP_NAME).write_text(json.dumps(stamp))
    installed = current_runtime()
    if installed.is_installed():  # borrow its stripped stdlib (bwrap follows the link)
        (venv / STDLIB_DIR).symlink_to(installed.stdlib)
    else:
        build_stdlib(Path(base), venv / STDLIB_DIR, log=lambda _: None)
    with BwrapSandbox(Runtime(venv)) as sandbox, sandbox.scratch(QUICK.disk_mb) as workspace:
        result = sandbox.run(py(workspace, "import sys; print(sys.prefix)"))
    assert result.stdout.strip() == str(venv).encode(), result


def test_a_host_without_a_seccomp_filter_cannot_use_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("platform.machine", lambda: "riscv64")
    with pytest.raises(SandboxUnavailable, match="no seccomp filter for riscv64") as caught:
        BwrapSandbox().prepare()
    assert caught.value.hint


def test_a_job_cannot_signal_or_renice_processes_of_its_uid_outside_it(
    bwrap: BwrapSandbox, workspace: Path
) -> None:
    """Another job of the same lab runs as the same uid: ``kill(-1)`` and ``PRIO_USER`` reach
    only the job's own pid namespace, not it (here: a host process of the sandbox uid)."""
    ids = {"user": bwrap.uid, "group": bwrap.gid} if os.geteuid() == 0 else {}
    other = subprocess.Popen(  # cat: a program every uid may run (not a venv under /root)
        ["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, **ids
    )
    try:
        code = (
            "import os, signal\n"
            "os.setpriority(os.PRIO_USER, os.getuid(), 19)\n"
            "try:\n"
            "    os.kill(-1, signal.SIGSTOP)\n"
            "except ProcessLookupError:\n"
            "    pass\n"
            "print(os.getpriority(os.PRIO_PROCESS, 0))\n"
        )
        result = bwrap.run(py(workspace, code))
        assert result.stdout.strip() == b"19"  # the job's own processes were reniced
        with open(f"/proc/{other.pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        assert fields[0] not in "Tt", fields[0]  # not stopped
        assert fields[16] == "0"  # nor reniced
    finally:
        other.stdin.close()  # type: ignore[union-attr]
        other.wait()
