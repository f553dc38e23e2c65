"""What a coding agent leaves in its workspace that a snapshot (a candidate's or a job's
harness tree, :func:`rsilab.expos.services.snapshot_workspace`) leaves out: bytecode and tool
caches at any depth, and the Experiment OS's own folders at the root only."""

from __future__ import annotations

from pathlib import Path

from rsilab.expos.services import snapshot_workspace
from rsilab.store.artifacts import ArtifactStore

KEPT = {
    "train.py": "print('train')\n",
    "pkg/mod.py": "x = 1\n",
    "pkg/data-in/table.csv": "a,b\n",  # reserved names count at the root only
    "node_modules/dep/index.js": "module.exports = 1;\n",  # a harness may run with it
    "notes/cache.md": "not a cache folder\n",
}
LEFT_OUT = {
    "__pycache__/train.cpython-312.pyc": "bytecode",
    "pkg/__pycache__/mod.cpython-312.pyc": "bytecode",
    "pkg/stray.pyc": "bytecode",
    "old.pyo": "bytecode",
    ".pytest_cache/v/cache/lastfailed": "{}",
    ".mypy_cache/3.12/mod.meta.json": "{}",
    "pkg/.ruff_cache/content": "x",
    "data-in/train.jsonl": "{}\n",
    "runs/job-1/model.json": "{}\n",
}


def _fill(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


def test_bytecode_caches_and_reserved_folders_are_left_out(tmp_path: Path) -> None:
    artifacts = ArtifactStore(tmp_path / "blobs")
    artifacts.ensure()
    workspace = tmp_path / "ws"
    _fill(workspace, {**KEPT, **LEFT_OUT})
    sha = snapshot_workspace(artifacts, workspace)
    assert {e["path"] for e in artifacts.manifest(sha)} == set(KEPT)

    clean = tmp_path / "clean"  # the same tree without them: the same digest
    _fill(clean, KEPT)
    assert snapshot_workspace(artifacts, clean) == sha == artifacts.put_tree(clean).sha256
