"""What a task's build step wrote into its runtime, and the check that it is still that.

A task's build step (``Task.runtime_build``, run once by ``rsilab runtime install --task T`` or
``rsilab runtime adopt``) returns facts the runtime's stamp keeps under ``built``. A fact
``NAME`` holding a path, beside ``NAME_sha256`` holding that file's sha256, names a *built
file* (posttrain: ``posttrain_base`` and ``posttrain_base_sha256``, its base model). A
campaign starts only when every built file still hashes to what the stamp says: a file
changed after the install fails closed, in one line, and is never rebuilt on the way.
Another machine of a Ray cluster gets the same bytes instead of building its own:
:func:`copy_built` is a build step that copies the head's built files, checked by sha256.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rsilab.errors import UserError
from rsilab.sandbox.runtime import Runtime, install_command

DIGEST_SUFFIX = "_sha256"
"""A ``built`` fact ``NAME`` + this suffix holds the sha256 of the file fact ``NAME`` names."""


class BuiltFileChanged(UserError):
    """A file a task's build step wrote into its runtime no longer matches the stamp."""


@dataclass(frozen=True)
class BuiltFile:
    """One file a build step wrote, as the runtime's stamp records it."""

    name: str
    """The fact's name in the stamp (e.g. ``posttrain_base``)."""
    path: Path
    """Where it was written (inside the runtime)."""
    sha256: str
    """Its sha256 when the runtime was installed."""


def built_files(runtime: Runtime) -> list[BuiltFile]:
    """The built files the stamp of ``runtime`` names, sorted by name; empty when it names
    none (or has no stamp)."""
    built = (runtime.stamp() or {}).get("built") or {}
    if not isinstance(built, dict):
        return []
    return [
        BuiltFile(name, Path(str(built[name])), str(built[name + DIGEST_SUFFIX]))
        for name in sorted(built)
        if not name.endswith(DIGEST_SUFFIX) and name + DIGEST_SUFFIX in built
    ]


def file_sha256(path: Path) -> str:
    """sha256 of the file at ``path``, read in blocks (OSError when it cannot be read)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_built(runtime: Runtime, task: str) -> list[BuiltFile]:
    """Every built file of ``runtime`` (task ``task``'s), each checked to hash as stamped.

    Raises:
        BuiltFileChanged: a file is missing or its bytes changed since the install; the hint
            names the command that installs (and builds) the runtime again.
    """
    files = built_files(runtime)
    for found in files:
        try:
            actual = file_sha256(found.path)
        except OSError as exc:
            raise BuiltFileChanged(
                f"task {task!r}: {found.name} at {found.path} cannot be read ({exc.strerror})",
                f"run `{install_command(task)} --force`",
            ) from exc
        if actual != found.sha256:
            raise BuiltFileChanged(
                f"task {task!r}: {found.name} at {found.path} changed since its runtime was "
                f"installed (sha256 {actual[:12]}..., the stamp says {found.sha256[:12]}...)",
                f"run `{install_command(task)} --force` to build it again",
            )
    return files


def copy_built(
    stamp_file: Path,
    key: str,
    folder: Path,
    log: Callable[[str], None] = print,
    *,
    build_id: str = "",
) -> dict[str, str]:
    """A build step that copies instead of building (``rsilab runtime install --task T
    --built-from STAMP``, for a Ray node): the built files another install of the same runtime
    (stamp key ``key``, built under ``build_id``) recorded in its stamp ``stamp_file`` - the
    head's, copied with the files at the same places relative to the stamp's folder - each
    checked against its
    sha256 and copied into the runtime ``folder`` at the path the stamp names, which must lie
    in ``folder`` (Ray needs every node's runtime at one path). Returns the stamp's facts.

    Raises:
        BuiltFileChanged: the stamp is unreadable, of other requirements, names a file
            outside ``folder``, or a file's bytes differ from its sha256.
    """
    try:
        stamp = json.loads(stamp_file.read_text("utf-8"))
        built = {str(k): str(v) for k, v in dict(stamp.get("built") or {}).items()}
    except (OSError, ValueError, TypeError) as exc:
        raise BuiltFileChanged(f"cannot read the stamp {stamp_file}: {exc}", "") from exc
    if stamp.get("key") != key:
        raise BuiltFileChanged(
            f"{stamp_file} is the stamp of another runtime (key {stamp.get('key')}, not {key})",
            "copy the stamp of the same task's runtime, installed with the same rsilab",
        )
    if (stamp.get("build_id") or "") != build_id:
        raise BuiltFileChanged(
            f"{stamp_file} records another build ({stamp.get('build_id') or 'none'}, not "
            f"{build_id or 'none'}): its files are not what this rsilab builds",
            "install the same rsilab on both machines, then `rsilab runtime install --task` on "
            "the head again",
        )
    for name in sorted(built):
        if name.endswith(DIGEST_SUFFIX) or name + DIGEST_SUFFIX not in built:
            continue
        target, digest = Path(built[name]), built[name + DIGEST_SUFFIX]
        if not target.is_relative_to(folder):
            raise BuiltFileChanged(
                f"{name} was built at {target}, outside this runtime at {folder}",
                "install the runtime at the same path as the one the stamp comes from",
            )
        source = stamp_file.parent / target.relative_to(folder)
        try:
            actual = file_sha256(source)
        except OSError as exc:
            raise BuiltFileChanged(f"{name}: cannot read {source} ({exc.strerror})", "") from exc
        if actual != digest:
            raise BuiltFileChanged(
                f"{name} at {source} is not the file the stamp names (sha256 {actual[:12]}..., "
                f"the stamp says {digest[:12]}...)",
                "copy the file the head's runtime holds, unchanged",
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        log(f"{name}: copied from {source} (sha256 {digest})")
    return built
