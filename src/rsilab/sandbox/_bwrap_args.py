"""The bubblewrap command line: an empty root with only what a job needs, read-only.

Visible to a job: /usr (and the /bin, /lib, /lib64, /sbin links or folders), a generated /etc
(passwd and group naming the sandbox user, nsswitch, hosts with localhost only, no
resolv.conf), the Python the runtime venv was made from (its own site-packages masked, and its
standard library replaced by the runtime's stripped copy: compiled ``.pyc`` files without
sources or docstrings, see :mod:`rsilab.sandbox.runtime`), the runtime venv, a fresh /proc of
the job's pid namespace, a minimal /dev (with only the job's assigned GPUs' device nodes,
see :mod:`rsilab.sandbox._gpu`), size-limited tmpfs /tmp and /dev/shm, extra mounts
(a read-only file may replace /etc/hosts), and the workspace at :data:`WORKSPACE` (the only
writable host folder). Folders bwrap creates on the way to a bind get mode 0755, so an
unprivileged uid can reach a path whose host parents it could not (e.g. a Python under /root).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

from rsilab.sandbox._gpu import device_args
from rsilab.sandbox.base import RunSpec
from rsilab.sandbox.runtime import STDLIB_DIR, stdlib_subdir

WORKSPACE = PurePosixPath("/workspace")
"""Where the workspace appears inside the sandbox (also the working directory)."""

SANDBOX_HOME = "/tmp"
_TOP_LEVEL = ("/bin", "/lib", "/lib32", "/lib64", "/libx32", "/sbin")
_ETC_FROM_HOST = ("ld.so.cache", "localtime", "alternatives")
_SYSTEM_PYTHON_LIBS = ("/usr/lib", "/usr/local/lib")
"""Where a system Python keeps its stdlib and packages (``python3*`` folders, masked)."""
_RESERVED = ("/usr", "/etc", "/proc", "/dev", "/workspace", "/bin", "/lib", "/lib64", "/sbin")
_REPLACEABLE = (PurePosixPath("/etc/hosts"),)
"""Generated files a read-only mount of a file may replace (``rsilab agent`` maps an LLM
endpoint's host name to its relay on the job's loopback)."""


_BUNDLED_ROOTS = ("/usr/lib", "/usr/local", "/usr/share", "/usr/libexec")
_BUNDLED_DEPTH = 7


def bundled_python_stdlibs(
    roots: Iterable[str] = _BUNDLED_ROOTS, depth: int = _BUNDLED_DEPTH
) -> list[Path]:
    """Every ``python3*`` folder under ``roots`` (``depth`` levels down, links not followed)
    that holds a Python stdlib (``os.py`` or ``lib-dynload``): hidden from every job, since
    its sources and docstrings are text some tasks' data is made of. Takes ~0.4 s on a
    typical /usr, once per sandbox."""
    found: list[Path] = []

    def walk(folder: str, level: int) -> None:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False):
                continue
            if entry.name.startswith("python3") and (
                os.path.isfile(os.path.join(entry.path, "os.py"))
                or os.path.isdir(os.path.join(entry.path, "lib-dynload"))
            ):
                found.append(Path(entry.path))
            elif level < depth:
                walk(entry.path, level + 1)

    for root in roots:
        walk(root, 0)
    return sorted(found)


def _under(path: PurePosixPath | Path, roots: Iterable[PurePosixPath | Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def write_files(folder: Path, uid: int, gid: int) -> None:
    """Generate the sandbox's passwd, group, nsswitch.conf and hosts in ``folder/etc``, and
    ``folder/masked``, the file shown in place of a hidden file: mode 000, so a job (which
    holds no capability to override modes) fails to open it (``PermissionError``) rather
    than reading empty data it might take for the real thing."""
    files = {
        "passwd": f"root:x:0:0:root:/root:/usr/sbin/nologin\n"
        f"sandbox:x:{uid}:{gid}:rsilab sandbox:{SANDBOX_HOME}:/usr/sbin/nologin\n",
        "group": f"root:x:0:\nsandbox:x:{gid}:\n",
        "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
        "hosts": "127.0.0.1 localhost\n::1 localhost\n",
    }
    (folder / "etc").mkdir(mode=0o755)
    for name, text in files.items():
        path = folder / "etc" / name
        path.write_text(text)
        path.chmod(0o444)
    (folder / "masked").touch(mode=0o000)
    (folder / "masked").chmod(0o000)  # whatever the umask


class Layout:
    """The parts of the command line that are the same for every job of one sandbox:
    ``args`` (system folders, /etc) and ``python_args`` (placed by :meth:`job_args`)."""

    def __init__(self, files: Path, base_prefix: Path, runtime: Path) -> None:
        self.base_prefix = base_prefix
        self.runtime = runtime
        self.stdlib = runtime / STDLIB_DIR
        self.masked_file = files / "masked"
        self.binds: list[tuple[Path, PurePosixPath]] = []
        self.masked: list[Path] = []
        self.args = self._system() + self._etc(files / "etc")
        self.python_args = self._python()

    def _bind(self, source: Path, target: PurePosixPath, flag: str = "--ro-bind") -> list[str]:
        self.binds.append((source, target))
        return [flag, str(source), str(target)]

    def _system(self) -> list[str]:
        args = self._bind(Path("/usr"), PurePosixPath("/usr"))
        for top in _TOP_LEVEL:
            if os.path.islink(top):  # merged /usr: recreate the link, bind nothing new
                args += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                args += self._bind(Path(top), PurePosixPath(top))
        # A system Python's stdlib (e.g. Debian's /usr/lib/python3.11) is the same source,
        # docstrings and all, as the stripped one; no job needs it: covered by empty folders.
        # Bundled Pythons elsewhere under /usr (a cloud SDK's, an IDE's) carry the same text.
        system = {p for lib in _SYSTEM_PYTHON_LIBS for p in Path(lib).glob("python3*")}
        for found in sorted(system | set(bundled_python_stdlibs())):
            if found.is_dir() and not found.is_symlink():
                self.masked.append(found)
                args += ["--tmpfs", str(found), "--remount-ro", str(found)]
        return args

    def _etc(self, etc_dir: Path) -> list[str]:
        args = ["--perms", "0755", "--dir", "/etc"]
        for name in sorted(os.listdir(etc_dir)):
            args += ["--ro-bind", str(etc_dir / name), f"/etc/{name}"]
        for name in _ETC_FROM_HOST:
            host = Path("/etc", name)
            if host.is_symlink():
                args += ["--symlink", os.readlink(host), str(host)]
            elif host.exists():
                args += self._bind(host, PurePosixPath(host))
        return args

    def _python(self) -> list[str]:
        """Binds of the base Python and the runtime; they follow the /tmp tmpfs, which would
        otherwise cover a runtime kept under /tmp."""
        frozen = [target for _, target in self.binds]
        made = {PurePosixPath(p) for p in ("/tmp", "/dev", "/dev/shm", "/proc")}
        args = parents_of([self.base_prefix, self.runtime], exists=made, frozen=frozen)
        args += self._bind(self.base_prefix, PurePosixPath(self.base_prefix))
        # The real stdlib holds the source (and docstrings) tasks build data from: the
        # stripped copy stands in its place, and hidden paths under it need no mask.
        real = self.base_prefix / stdlib_subdir()
        args += ["--ro-bind", str(self.stdlib), str(real)]
        self.masked.append(real)
        # The base Python's own site-packages may hold anything (rsilab, scikit-learn and its
        # data files): only the runtime venv's packages are meant to be importable.
        for site in sorted(self.base_prefix.glob("lib/python3*/site-packages")):
            self.masked.append(site)
            args += ["--tmpfs", str(site), "--remount-ro", str(site)]
        args += self._bind(self.runtime, PurePosixPath(self.runtime))
        return args

    def job_args(self, spec: RunSpec, workspace: Path, hidden: Sequence[Path]) -> list[str]:
        """Per-job arguments: /proc, /dev, tmpfs sizes, workspace, mounts, hidden paths."""
        size = str(spec.limits.disk_mb * 1024 * 1024)
        args = ["--proc", "/proc", "--dev", "/dev"]
        # Only the assigned GPUs' nodes (and the control nodes): CUDA_VISIBLE_DEVICES alone
        # would leave every GPU open to the job.
        args += device_args(spec.gpus, spec.gpu_devices)
        args += ["--perms", "1777", "--size", size, "--tmpfs", "/dev/shm"]
        args += ["--perms", "1777", "--size", size, "--tmpfs", "/tmp"]
        args += self.python_args
        binds = [*self.binds, (workspace, WORKSPACE)]
        flag = "--ro-bind" if spec.read_only_workspace else "--bind"
        args += [flag, str(workspace), str(WORKSPACE)]
        frozen = [PurePosixPath(t) for _, t in binds] + [PurePosixPath(r) for r in _RESERVED]
        exists = {*frozen, PurePosixPath("/tmp")}
        for mount in spec.mounts:
            target, source = PurePosixPath(mount.target), Path(mount.source).resolve()
            replaces = target in _REPLACEABLE and not mount.writable and source.is_file()
            if target == PurePosixPath("/") or (_under(target, frozen) and not replaces):
                raise ValueError(f"mount target {target} would cover a system path")
            args += parents_of([Path(target)], exists=exists, frozen=frozen)
            args += ["--bind" if mount.writable else "--ro-bind", str(source), str(target)]
            binds.append((source, target))
            exists.add(target)
        args += mask(hidden, binds, already=self.masked, unopenable=self.masked_file)
        return [*args, "--remount-ro", "/", "--chdir", str(WORKSPACE)]


def parents_of(
    targets: Sequence[Path], exists: set[PurePosixPath], frozen: Sequence[PurePosixPath]
) -> list[str]:
    """``--dir`` (mode 0755) for every missing parent of ``targets``, outermost first;
    ``exists`` grows with what is made. Parents under a read-only bind (``frozen``) must
    already exist there."""
    args: list[str] = []
    for target in targets:
        for parent in reversed(PurePosixPath(target).parents):
            if str(parent) == "/" or parent in exists or _under(parent, frozen):
                continue
            exists.add(parent)
            args += ["--perms", "0755", "--dir", str(parent)]
    return args


def mask(
    hidden: Sequence[Path],
    binds: Sequence[tuple[Path, PurePosixPath]],
    already: Sequence[Path],
    unopenable: Path,
) -> list[str]:
    """Cover every hidden path a bind would show: a folder by an empty read-only tmpfs, a
    file by the ``unopenable`` file (mode 000: opening it fails, so a job cannot mistake it
    for an empty data file; binds are nodev, so /dev/null would not serve). Paths under
    ``already`` masked folders (or an earlier one) are skipped: they are invisible, and their
    mount points would not exist."""
    args: list[str] = []
    covered = [p.resolve() for p in already]
    for host in sorted({Path(p).resolve() for p in hidden}):
        if not host.exists() or _under(host, covered):
            continue
        for source, target in binds:
            root = source.resolve()
            if host.is_relative_to(root):
                inside = str(target / host.relative_to(root).as_posix())
                if host.is_dir():
                    args += ["--tmpfs", inside, "--remount-ro", inside]
                else:
                    args += ["--ro-bind", str(unopenable), inside]
        if host.is_dir():
            covered.append(host)
    return args
