"""Host paths every job sees read-only (a task's local model): the sandbox shows them, the
preflight's check finds what would keep a job from reading them, and their digest."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from rsilab.sandbox import BwrapSandbox, SandboxError
from rsilab.sandbox.shown import problem, tree_digest
from tests.sandbox.helpers import QUICK, bwrap_problem, passable_folder, py

STRANGER = (54321, 54321)
"""A user and group that own nothing here: they read by the 'others' permission bits."""


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """A folder every user can pass through (pytest's own lies under a private one)."""
    with passable_folder("rsilab-shown-") as made:
        yield made


def _model(tmp_path: Path) -> Path:
    model = tmp_path / "models" / "tiny"
    (model / "sub").mkdir(parents=True)
    (model / "config.json").write_text('{"model_type": "llama"}')
    (model / "sub" / "weights.bin").write_bytes(b"\x00\x01weights")
    for path in (tmp_path, tmp_path / "models", model, model / "sub"):
        path.chmod(0o755)
    for path in (model / "config.json", model / "sub" / "weights.bin"):
        path.chmod(0o644)
    return model


def test_a_model_everyone_can_read_has_no_problem(tmp_path: Path) -> None:
    assert problem(_model(tmp_path), *STRANGER) is None


@pytest.mark.parametrize(
    ("spoil", "said"),
    [
        (lambda m: (m / "sub" / "weights.bin").chmod(0o600), "weights.bin cannot be read"),
        (lambda m: (m / "sub").chmod(0o700), "sub cannot be read"),
        (lambda m: m.parent.chmod(0o700), "folder"),  # a folder above it cannot be passed
        (lambda m: (m / "link").symlink_to(m.parent), "outside"),
        (lambda m: (m / "sub" / "weights.bin").unlink() or m.rename(m.with_name("x")), "exist"),
    ],
)
def test_what_would_keep_a_job_from_reading_the_model_is_named(
    tmp_path: Path, spoil: object, said: str
) -> None:
    model = _model(tmp_path)
    spoil(model)  # type: ignore[operator]
    found = problem(model, *STRANGER)
    assert found is not None and said in found, found


def test_its_owner_and_root_read_what_others_cannot(tmp_path: Path) -> None:
    model = _model(tmp_path)
    (model / "config.json").chmod(0o600)
    mine = os.stat(model / "config.json")
    assert problem(model, *STRANGER) is not None
    assert problem(model, mine.st_uid, mine.st_gid) is None
    assert problem(model, 0, 0) is None


def test_a_link_inside_the_model_is_followed(tmp_path: Path) -> None:
    model = _model(tmp_path)
    (model / "weights.bin").symlink_to("sub/weights.bin")
    assert problem(model, *STRANGER) is None


def test_the_digest_names_every_file_its_path_and_bytes(tmp_path: Path) -> None:
    model = _model(tmp_path)
    lines = [
        f"{name}\0{len(data)}\0{hashlib.sha256(data).hexdigest()}\n"
        for name, data in [("config.json", b'{"model_type": "llama"}'),
                           ("sub/weights.bin", b"\x00\x01weights")]
    ]  # fmt: skip
    digest = tree_digest(model)
    assert digest.sha256 == hashlib.sha256("".join(lines).encode()).hexdigest()
    assert (digest.files, digest.bytes) == (2, 23 + 9)
    (model / "sub" / "weights.bin").write_bytes(b"\x00\x02weights")
    assert tree_digest(model).sha256 != digest.sha256
    (model / "sub" / "weights.bin").write_bytes(b"\x00\x01weights")
    (model / "sub" / "weights.bin").rename(model / "sub" / "w.bin")
    assert tree_digest(model).sha256 != digest.sha256, "a renamed file is another model"


def test_a_sandbox_shows_the_path_read_only_where_it_is(tmp_path: Path) -> None:
    if bwrap_problem() is not None:
        pytest.skip(f"bubblewrap is unusable here ({bwrap_problem()})")
    model = _model(tmp_path)
    code = (
        "import pathlib, sys; p = pathlib.Path(sys.argv[1]); print(p.read_bytes().hex())\n"
        "try:\n    p.write_bytes(b'x')\nexcept OSError as e:\n    print('refused', e.errno)\n"
    )
    target = str(model / "sub" / "weights.bin")
    for shown in ([model], []):
        with BwrapSandbox(shown=shown) as sandbox, sandbox.scratch(QUICK.disk_mb) as workspace:
            seen = sandbox.run(replace(py(workspace, code), argv=("python", "-c", code, target)))
        if shown:
            assert seen.exit_code == 0, seen.stderr
            lines = seen.stdout.decode().split("\n")
            assert lines[:2] == [b"\x00\x01weights".hex(), "refused 30"]  # EROFS
        else:
            assert seen.exit_code != 0 and b"FileNotFoundError" in seen.stderr
    assert (model / "sub" / "weights.bin").read_bytes() == b"\x00\x01weights"


def test_a_shown_path_gone_from_the_host_refuses_the_job_in_one_line(tmp_path: Path) -> None:
    if bwrap_problem() is not None:
        pytest.skip(f"bubblewrap is unusable here ({bwrap_problem()})")
    model = _model(tmp_path)
    with BwrapSandbox(shown=[model]) as sandbox, sandbox.scratch(QUICK.disk_mb) as workspace:
        assert sandbox.run(py(workspace, "print(1)")).exit_code == 0
        shutil.rmtree(model)
        with pytest.raises(SandboxError, match="is gone from the host: restore it"):
            sandbox.run(py(workspace, "print(1)"))
