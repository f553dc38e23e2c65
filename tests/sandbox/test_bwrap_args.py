"""The bubblewrap command line: which host folders a job sees, and every flag, pinned."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rsilab.sandbox import BwrapSandbox, Limits, RunSpec
from rsilab.sandbox._bwrap_args import bundled_python_stdlibs
from rsilab.sandbox._cgroup import CgroupSupport
from rsilab.sandbox._common import FdArgs
from rsilab.sandbox._job_start import default_signals_tool
from tests.sandbox.helpers import bwrap_problem


def test_bundled_python_stdlibs_are_found_for_hiding(tmp_path: Path) -> None:
    sdk = tmp_path / "lib/some-sdk/platform/bundled/lib/python3.12"
    sdk.mkdir(parents=True)
    (sdk / "os.py").write_text("'''docstrings live here'''\n")
    dynload = tmp_path / "lib/other/python3.10"
    (dynload / "lib-dynload").mkdir(parents=True)
    (tmp_path / "lib/python3-tools").mkdir()  # a python3* name that is no stdlib
    too_deep = tmp_path / "a/b/c/d/e/f/g/h/python3.9"
    too_deep.mkdir(parents=True)
    (too_deep / "os.py").write_text("")
    found = bundled_python_stdlibs([str(tmp_path)], depth=7)
    assert found == sorted([sdk, dynload])


# --- the whole command line, pinned ----------------------------------------------------------

GATE = 'read -r go && [ "$go" = go ] || exit 125; exec "$@"'
LOW_PORTS = '{ echo 0 > /proc/sys/net/ipv4/ip_unprivileged_port_start; } 2>/dev/null; exec "$@"'
PY = f"python{sys.version_info.major}.{sys.version_info.minor}"
THREADS = ["MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"]

EXPECTED_ARGS = [
    *("--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"),
    "--unshare-cgroup-try",
    "<user namespace>",
    *("--hostname", "sandbox", "--die-with-parent", "--new-session", "--clearenv"),
    *("--setenv", "HOME", "/tmp"),
    *("--setenv", "JOB_SETTING", "on"),
    *("--setenv", "LANG", "C.UTF-8"),
    *[x for name in THREADS[:2] for x in ("--setenv", name, "2")],
    *[x for name in THREADS[2:] for x in ("--setenv", name, "2")],
    *("--setenv", "PATH", "<runtime>/bin:/usr/local/bin:/usr/bin:/bin"),
    *("--setenv", "TMPDIR", "/tmp"),
    *("--setenv", "TORCH_NUM_THREADS", "2"),
    "<system folders>",
    *("--perms", "0755", "--dir", "/etc"),
    *("--ro-bind", "<files>/etc/group", "/etc/group"),
    *("--ro-bind", "<files>/etc/hosts", "/etc/hosts"),
    *("--ro-bind", "<files>/etc/nsswitch.conf", "/etc/nsswitch.conf"),
    *("--ro-bind", "<files>/etc/passwd", "/etc/passwd"),
    "<host /etc files>",
    *("--proc", "/proc", "--dev", "/dev"),
    *("--perms", "1777", "--size", str(64 << 20), "--tmpfs", "/dev/shm"),
    *("--perms", "1777", "--size", str(64 << 20), "--tmpfs", "/tmp"),
    "<parent folders>",
    *("--ro-bind", "<python>", "<python>"),
    *("--ro-bind", "<runtime>/stdlib", f"<python>/lib/{PY}"),
    *("--tmpfs", f"<python>/lib/{PY}/site-packages"),
    *("--remount-ro", f"<python>/lib/{PY}/site-packages"),
    *("--ro-bind", "<runtime>", "<runtime>"),
    *("--bind", "<workspace>", "/workspace"),
    *("--remount-ro", "/", "--chdir", "/workspace"),
]
"""bwrap's options for a typical job (read from its --args file descriptor): per-host parts
(which system folders exist, the runtime's place) stand as placeholders."""

ROOT_TAIL = ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
ROOT_COMMAND = [
    *("<env>", "--default-signal", "--"),
    *("/bin/sh", "-c", GATE, "rsilab-gate"),
    *("<prlimit>", "--core=0", f"--fsize={32 << 20}", "--nofile=4096"),
    *("<bwrap>", "--args", "<fd>", "--seccomp", "<fd>", "--"),
    *("/bin/sh", "-c", LOW_PORTS, "rsilab-ports"),
    *("<setpriv>", "--reuid=<uid>", "--regid=<uid>", "--clear-groups", "--inh-caps=-all"),
    *("--bounding-set=-all", "--no-new-privs", "--"),
    *("python", "train.py"),
]
UNPRIVILEGED_COMMAND = [
    *("<env>", "--default-signal", "--"),
    *("/bin/sh", "-c", GATE, "rsilab-gate"),
    *("<prlimit>", "--core=0", f"--fsize={32 << 20}", "--nofile=4096"),
    *("--cpu=30:31", f"--data={1024 << 20}", "--nproc=<nproc>"),
    *("<bwrap>", "--args", "<fd>", "--seccomp", "<fd>", "--"),
    *("python", "train.py"),
]


def _skeleton(args: list[str], box: BwrapSandbox, workspace: Path) -> list[str]:
    """``args`` with this host's paths as placeholders (bwrap's options: and its folder
    layout collapsed)."""
    names = {
        str(box._files): "<files>",
        str(box.runtime.path): "<runtime>",
        str(box.runtime.base_prefix()): "<python>",
        str(workspace): "<workspace>",
        **{path: f"<{name}>" for name, path in box._tools.items()},
        default_signals_tool(): "<env>",
    }
    out = []
    for arg in args:
        for path, name in names.items():
            arg = name if arg == path else arg.replace(path + "/", name + "/")
        out.append(arg.replace(f"={box.uid}", "=<uid>"))
    return out if out[0] == "<env>" else _collapse(out)


def _collapse(out: list[str]) -> list[str]:
    if "--unshare-user" in out:
        at = out.index("--unshare-user")
        out[at : at + 2] = ["<user namespace>"] if out[at + 1] == "--disable-userns" else [out[at]]
    else:
        out.insert(out.index("--unshare-cgroup-try") + 1, "<user namespace>")
    start, end = out.index("/usr") - 1, out.index("/etc") - 3  # /usr's bind .. --dir /etc
    out[start:end] = ["<system folders>"]
    first, last = out.index("/etc/passwd") + 1, out.index("--proc")
    out[first:last] = ["<host /etc files>"]
    tmp = out.index("/tmp", out.index("/dev/shm")) + 1
    ends = out.index("<python>", tmp) - 1
    assert all(out[i : i + 3] == ["--perms", "0755", "--dir"] for i in range(tmp, ends, 4))
    out[tmp:ends] = ["<parent folders>"]
    return out


@pytest.fixture(scope="module")
def box() -> Iterator[BwrapSandbox]:
    if bwrap_problem() is not None:
        pytest.skip(f"bubblewrap is unusable here ({bwrap_problem()})")
    with BwrapSandbox() as made:
        assert isinstance(made, BwrapSandbox)
        yield made


def _typical(box: BwrapSandbox, workspace: Path) -> tuple[list[str], list[str]]:
    limits = Limits(cpu_s=30, memory_mb=1024, disk_mb=64, file_mb=32)
    spec = RunSpec(("python", "train.py"), workspace, limits, env={"JOB_SETTING": "on"}, threads=2)
    assert box._layout is not None
    args = box._args(spec, workspace, box._layout)
    with FdArgs(args, b"") as fds:
        command = box._command(spec, fds)
    command = ["<fd>" if a in (str(fds.args), str(fds.seccomp)) else a for a in command]
    return args, command


@pytest.mark.skipif(os.geteuid() != 0, reason="the root command line is built only as root")
def test_the_root_command_line_is_pinned(box: BwrapSandbox, tmp_path: Path) -> None:
    args, command = _typical(box, tmp_path)
    assert box.cgroups, "as root, limits hold through cgroups, so prlimit sets no CPU limit"
    assert _skeleton(args, box, tmp_path) == [*EXPECTED_ARGS, *ROOT_TAIL]
    assert _skeleton(command, box, tmp_path) == ROOT_COMMAND


def test_the_unprivileged_command_line_is_pinned(
    box: BwrapSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(box, "root", False)
    monkeypatch.setattr(box, "_cgroups", CgroupSupport({}, "not root"))
    args, command = _typical(box, tmp_path)
    skeleton = _skeleton(args, box, tmp_path)
    assert args[5:7] == ["--unshare-user", "--disable-userns"]
    assert skeleton == EXPECTED_ARGS
    nproc = [a for a in command if a.startswith("--nproc=")]
    assert len(nproc) == 1
    command = [a if a not in nproc else "--nproc=<nproc>" for a in command]
    assert _skeleton(command, box, tmp_path) == UNPRIVILEGED_COMMAND
