"""A task runtime that counts as installed without pip: for tests of what reads its stamp."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Sequence

from rsilab.sandbox import runtime as rt


def fake_task_runtime(
    extra: Sequence[str], payload: bytes = b"base model bytes", build_id: str = "build 1"
) -> rt.Runtime:
    """An installed-looking runtime of ``extra`` at its keyed path (set ``RSILAB_RUNTIME``
    first), whose build step ``build_id`` "wrote" ``share/base.bin`` holding ``payload``."""
    runtime = rt.task_runtime(extra, build_id=build_id)
    (runtime.path / "bin").mkdir(parents=True)
    (runtime.path / "bin" / "python").symlink_to(sys.executable)
    (runtime.path / rt.STDLIB_DIR).mkdir()
    (runtime.path / rt.STDLIB_DIR / "os.pyc").write_bytes(b"")
    base = runtime.path / "share" / "base.bin"
    base.parent.mkdir()
    base.write_bytes(payload)
    built = {"base": str(base), "base_sha256": hashlib.sha256(payload).hexdigest()}
    stamp = {
        "key": runtime.key,
        "base_prefix": sys.base_prefix,
        "stdlib": rt.STDLIB_FORMAT,
        "built": built,
        "build_id": build_id,
    }
    (runtime.path / rt.STAMP_NAME).write_text(json.dumps(stamp))
    assert runtime.is_installed()
    return runtime
