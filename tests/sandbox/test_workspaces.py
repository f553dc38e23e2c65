"""Workspaces: where they may be, owned for good by the sandbox user, and as root each its own
size-limited filesystem that a killed process leaves re-usable."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from rsilab.sandbox import (
    BwrapSandbox,
    Confinement,
    Limits,
    WorkspaceRefused,
    _images,
    check_placement,
    hand_over,
)
from rsilab.sandbox._identity import SandboxUser, ephemeral_user
from rsilab.sandbox._workspaces import WorkspaceFs, remove_stale_scratch
from tests.sandbox.helpers import bwrap_problem, py, wait_until

ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="only root gives workspaces to another uid")
IMAGES = pytest.mark.skipif(
    not _images.support().enforced, reason=f"no workspace images here: {_images.support().reason}"
)


# --- where a workspace may be ----------------------------------------------------------------

LAB = Path("/srv/proj/.rsilab")
KEYS = Path("/srv/keys")
PLACES = Confinement(
    SandboxUser(0x7000_0001, 0x7000_0001),
    private=(LAB, KEYS),
    workspaces=LAB / "workspaces",
)


@pytest.mark.parametrize(
    ("folder", "refusal"),
    [
        ("/srv/proj", "holds /srv/proj/.rsilab"),  # `rsilab agent --workspace .`
        ("/srv", "holds /srv/proj/.rsilab"),
        ("/", "holds /srv/proj/.rsilab"),
        ("/srv/proj/.rsilab", "holds /srv/proj/.rsilab"),
        ("/srv/proj/.rsilab/blobs", "lies inside /srv/proj/.rsilab"),
        ("/srv/proj/.rsilab/sandbox", "lies inside /srv/proj/.rsilab"),
        ("/srv/proj/.rsilab/workspaces", "lies inside /srv/proj/.rsilab"),  # all campaigns'
        ("/srv/keys/x", "lies inside /srv/keys"),
        ("/srv/proj/.rsilab/workspaces/cmp-1/worker-1", None),
        ("/srv/proj/src", None),
        ("/srv/other", None),
    ],
)
def test_where_a_workspace_may_be(folder: str, refusal: str | None) -> None:
    if refusal is None:
        check_placement(Path(folder), PLACES)
        return
    with pytest.raises(WorkspaceRefused) as caught:
        check_placement(Path(folder), PLACES)
    assert refusal in caught.value.message
    assert "\n" not in str(caught.value) and caught.value.hint


# --- ownership -------------------------------------------------------------------------------


@ROOT
def test_host_writes_are_handed_to_the_workspace_owner_without_following_links(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("host")
    workspace = tmp_path / "ws"
    (workspace / "deep").mkdir(parents=True)
    (workspace / "deep" / "model.json").write_text("{}")
    (workspace / "link").symlink_to(outside)
    hand_over(workspace)
    assert {p.lstat().st_uid for p in [workspace, *workspace.rglob("*")]} == {0}, "root's: no-op"
    os.chown(workspace, 0x7000_0001, 0x7000_0001)
    hand_over(workspace, workspace / "deep")
    assert (workspace / "deep" / "model.json").stat().st_uid == 0x7000_0001
    assert (workspace / "link").lstat().st_uid == 0, "only the paths named"
    hand_over(workspace)
    assert (workspace / "link").lstat().st_uid == 0x7000_0001
    assert outside.stat().st_uid == 0, "a link is handed over, never followed"


# --- images ----------------------------------------------------------------------------------


@pytest.fixture
def fs(tmp_path: Path) -> Iterator[WorkspaceFs]:
    confinement = Confinement(ephemeral_user(), state=tmp_path / "state", workspace_mb=32)
    made = WorkspaceFs(confinement, tmp_path / "state")
    yield made
    made.release_held()
    for point, _ in _images.mounts():  # nothing of this test may outlive it
        if point.is_relative_to(tmp_path):
            _images.unmount(point)


def _tree(folder: Path) -> dict[str, tuple[str, int, int]]:
    found = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        what = (
            os.readlink(path) if path.is_symlink() else path.read_text() if path.is_file() else ""
        )
        found[str(path.relative_to(folder))] = (what, info.st_uid, stat.S_IMODE(info.st_mode))
    return found


@IMAGES
def test_a_folder_becomes_a_filesystem_of_its_own_and_comes_back(
    fs: WorkspaceFs, tmp_path: Path
) -> None:
    folder = tmp_path / "ws"
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "train.py").write_text("print('hi')")
    (folder / "secret.txt").write_text("mine")
    (folder / "secret.txt").chmod(0o600)
    (folder / "passwd").symlink_to("/etc/passwd")
    uid = fs.confinement.user.uid
    made = fs.ensure(folder)
    assert made == folder.resolve() and _images.mounted_image(made) is not None
    assert os.major(made.stat().st_dev) == 7, "a loop device's filesystem"
    options = next(line for line in Path("/proc/self/mountinfo").read_text().splitlines()
                   if f" {made} " in line).split()[5]  # fmt: skip
    assert {"nosuid", "nodev", "noatime"} <= set(options.split(","))
    tree = _tree(made)
    assert tree == {
        "passwd": ("/etc/passwd", uid, 0o777),
        "secret.txt": ("mine", uid, 0o600),
        "src": ("", uid, 0o755),
        "src/train.py": ("print('hi')", uid, 0o644),
    }
    assert made.stat().st_uid == uid and Path("/etc/passwd").stat().st_uid == 0
    (made / "tool").write_text("#!/bin/sh\n")
    os.chown(made / "tool", uid, uid)
    (made / "tool").chmod(0o6755)  # as a job may leave it: harmless on a nosuid mount
    fs.release(made)
    assert _images.mounted_source(made) is None
    back = _tree(made)
    assert back["tool"] == ("#!/bin/sh\n", uid, 0o755), "set-id bits do not survive"
    assert {k: v for k, v in back.items() if k != "tool"} == tree
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == [], "image and record gone"


@IMAGES
def test_each_hold_is_released_once(fs: WorkspaceFs, tmp_path: Path) -> None:
    folder = fs.ensure(tmp_path / "ws")
    assert fs.ensure(folder) == folder
    fs.release(folder)
    assert _images.mounted_image(folder) is not None, "one hold is left"
    fs.release(folder)
    assert _images.mounted_source(folder) is None


@IMAGES
def test_a_workspace_holding_or_inside_another_is_refused(fs: WorkspaceFs, tmp_path: Path) -> None:
    inner = fs.ensure(tmp_path / "outer" / "inner")
    with pytest.raises(WorkspaceRefused, match="holds another mounted filesystem"):
        fs.ensure(tmp_path / "outer")
    with pytest.raises(WorkspaceRefused, match="inside the workspace filesystem"):
        fs.ensure(inner / "sub")


def _devices_reading(image: Path) -> list[str]:
    return [
        b.parent.parent.name
        for b in Path("/sys/block").glob("loop*/loop/backing_file")
        if b.read_text().strip().removesuffix(" (deleted)") == str(image)
    ]


@IMAGES
def test_an_image_still_in_use_elsewhere_is_never_mounted_twice(
    fs: WorkspaceFs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job's namespace (here: a bind mount) may still hold the filesystem when the host
    unmounts it; it is then reached through the same loop device, never a second one, which
    would be a second filesystem writing the same blocks."""
    folder = fs.ensure(tmp_path / "ws")
    image = _images.mounted_image(folder)
    assert image is not None
    (folder / "kept.txt").write_text("1")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    subprocess.run(["mount", "--bind", str(folder), str(elsewhere)], check=True)
    seen: list[int] = []
    copy = _images.copy_tree

    def counting_copy(source: Path, target: Path) -> None:
        seen.append(len(_devices_reading(image)))  # while the contents are copied out
        copy(source, target)

    monkeypatch.setattr(_images, "copy_tree", counting_copy)
    try:
        fs.release(folder)
        assert seen == [1]
        assert (folder / "kept.txt").read_text() == "1"
        assert len(_devices_reading(image)) == 1, "the bind holds it; no second device"
    finally:
        _images.unmount(elsewhere)


_KILLED_HOLDER = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from rsilab.sandbox import Confinement, SandboxUser
    from rsilab.sandbox._workspaces import WorkspaceFs
    state, folder, uid = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    fs = WorkspaceFs(Confinement(SandboxUser(uid, uid), state=state, workspace_mb=32), state)
    made = fs.ensure(folder)
    (made / "written-before-the-kill").write_text("kept")
    if sys.argv[4] == "filling":  # die half-way through making a workspace
        record = next(state.glob("*.json"))
        record.write_text(record.read_text().replace('"live"', '"filling"'))
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def _killed_holder(fs: WorkspaceFs, folder: Path, phase: str = "live") -> None:
    uid = str(fs.confinement.user.uid)
    argv = [sys.executable, "-c", _KILLED_HOLDER, str(fs.state), str(folder), uid, phase]
    done = subprocess.run(argv, capture_output=True, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()


@IMAGES
def test_a_killed_holder_leaves_a_workspace_the_next_process_takes_over(
    fs: WorkspaceFs, tmp_path: Path
) -> None:
    folder = (tmp_path / "ws").resolve()
    _killed_holder(fs, folder)
    image = _images.mounted_image(folder)
    assert image is not None, "SIGKILL ran no cleanup: the mount stays"
    made = fs.ensure(folder)
    assert _images.mounted_image(made) == image, "re-used, not copied again"
    record = json.loads(next(fs.state.glob("*.json")).read_text())
    assert record["phase"] == "live" and record["pid"] == os.getpid()
    assert (made / "written-before-the-kill").read_text() == "kept"
    fs.release(made)
    assert (folder / "written-before-the-kill").read_text() == "kept"
    assert _images.mounted_source(folder) is None


@IMAGES
def test_a_dead_holders_workspace_is_released_by_the_next_sandbox(
    fs: WorkspaceFs, tmp_path: Path
) -> None:
    folder = (tmp_path / "ws").resolve()
    _killed_holder(fs, folder)
    assert fs.release_orphans() == [folder]
    assert _images.mounted_source(folder) is None
    assert (folder / "written-before-the-kill").read_text() == "kept"


@IMAGES
def test_a_kill_while_a_workspace_is_being_made_starts_it_over(
    fs: WorkspaceFs, tmp_path: Path
) -> None:
    folder = (tmp_path / "ws").resolve()
    folder.mkdir()
    (folder / "train.py").write_text("x = 1")
    _killed_holder(fs, folder, phase="filling")
    _images.unmount(folder)  # where a kill mid-way leaves it: the folder is still the truth
    (folder / "train.py").write_text("x = 1")
    made = fs.ensure(folder)
    assert (made / "train.py").read_text() == "x = 1"
    assert json.loads(next(fs.state.glob("*.json")).read_text())["phase"] == "live"


@IMAGES
def test_scratch_left_by_a_dead_process_is_unmounted_and_removed() -> None:
    code = (
        "import os, signal\n"
        "from rsilab.sandbox import Confinement\n"
        "from rsilab.sandbox._identity import ephemeral_user\n"
        "from rsilab.sandbox._workspaces import WorkspaceFs\n"
        "import tempfile, pathlib\n"
        "state = pathlib.Path(tempfile.mkdtemp())\n"
        "fs = WorkspaceFs(Confinement(ephemeral_user(), workspace_mb=16), state)\n"
        "with fs.scratch(kind='test') as folder:\n"
        "    print(folder, flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, check=False)
    folder = Path(done.stdout.decode().strip())
    assert _images.mounted_image(folder) == folder.parent / "image"
    assert folder in remove_stale_scratch()
    assert _images.mounted_source(folder) is None and not folder.parent.exists()


def test_without_root_the_disk_limit_is_polled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    found = _images.support.__wrapped__()
    assert not found.enforced and "not running as root" in found.reason


# --- jobs in workspaces ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def bwrap() -> Iterator[BwrapSandbox]:
    if bwrap_problem() is not None:
        pytest.skip(f"bubblewrap is unusable here ({bwrap_problem()})")
    with BwrapSandbox() as made:
        assert isinstance(made, BwrapSandbox)
        yield made


@ROOT
@IMAGES
def test_fallocate_past_the_limit_fails_inside_and_leaves_nothing(bwrap: BwrapSandbox) -> None:
    code = (
        "import os\n"
        "for i in range(8):\n"
        "    fd = os.open('blob-%d' % i, os.O_CREAT | os.O_WRONLY)\n"
        "    try:\n"
        "        os.posix_fallocate(fd, 0, 500 << 20)\n"
        "    except OSError as exc:\n"
        "        print(i, exc.errno)\n"
        "        break\n"
    )
    with bwrap.scratch(64, kind="test") as workspace:
        limits = Limits(disk_mb=64, file_mb=512, wall_s=30)  # no single file is too large
        result = bwrap.run(py(workspace, code, limits=limits))
        assert result.stdout.split() == [b"0", b"28"], result  # ENOSPC at the first
        image = workspace.parent / "image"
        assert image.stat().st_blocks * 512 < 8 << 20, "the host holds almost nothing"


_MID_JOB = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from rsilab.sandbox import BwrapSandbox, Confinement, Limits, RunSpec, SandboxUser
    state, folder, uid = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    user = SandboxUser(uid, uid)
    box = BwrapSandbox(confinement=Confinement(user, state=state, workspace_mb=32))
    made = box.workspace(folder)
    code = "open('started', 'w').close(); import time; time.sleep(60)"
    print("running", flush=True)
    box.run(RunSpec(("python", "-c", code), made, Limits(wall_s=60)))
    """
)


@ROOT
def test_a_kill_during_a_job_leaves_the_workspace_usable(tmp_path: Path) -> None:
    """The regression of issue 21: SIGKILL during a job left the workspace root the sandbox
    user's while the host believed it lent, and every later job failed."""
    if bwrap_problem() is not None:
        pytest.skip(f"bubblewrap is unusable here ({bwrap_problem()})")
    user, state, folder = ephemeral_user(), tmp_path / "state", (tmp_path / "ws").resolve()
    argv = [sys.executable, "-c", _MID_JOB, str(state), str(folder), str(user.uid)]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
        try:
            assert proc.stdout is not None and proc.stdout.readline() == b"running\n"
            assert wait_until(lambda: (folder / "started").exists())
        finally:
            proc.kill()
    with BwrapSandbox(confinement=Confinement(user, state=state, workspace_mb=32)) as box:
        made = box.workspace(folder)
        result = box.run(py(made, "import os; os.mkdir('out'); open('out/m.json', 'w').write('1')"))
        assert result.ok, result
        owners = {p.lstat().st_uid for p in [made, *made.rglob("*")]}
        assert owners == {user.uid}
        box.release_workspace(made)
    assert _images.mounted_source(folder) is None
    assert (folder / "out" / "m.json").read_text() == "1"
