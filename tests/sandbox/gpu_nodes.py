"""Stand-in GPU device nodes for tests on machines without a GPU.

Each node is a character device with /dev/null's numbers (1:3), so opening and writing it
works where it is bound as a device, like a real ``/dev/nvidiaN`` would open.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

import pytest

_NULL = os.makedev(1, 3)


def make_dev_root(folder: Path, names: Iterable[str]) -> Path:
    """``folder/dev`` holding a stand-in node per name, reachable by any uid; skips the test
    where character devices cannot be made (mknod needs root)."""
    if os.geteuid() != 0:
        pytest.skip("making character devices (mknod) needs root")
    root = folder / "dev"
    root.mkdir(mode=0o755)
    folder.chmod(0o755)  # the sandbox uid reaches the nodes through it
    for name in names:
        os.mknod(root / name, 0o666 | stat.S_IFCHR, _NULL)
        os.chmod(root / name, 0o666)  # mknod's mode is masked by the umask
    return root
