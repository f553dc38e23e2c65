"""Workspace file tools: list, read, write and patch, confined to the caller's workspace."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rsilab.expos.tools import _nofollow, _unidiff
from rsilab.records import Outcome, ProtocolFlag, Role
from tests.expos.helpers import Bench


def _refused(bench: Bench, role: Role, tool: str, args: dict[str, Any], rule: str) -> str:
    """Call, expect a guard refusal recorded with its flag; return the message."""
    result = bench.call(role, tool, args)
    assert result.error is not None and result.error.code == "guard_refused", result.to_dict()
    event = bench.last_event()
    assert event.seq == result.seq and event.outcome == Outcome.DENIED
    (ref,) = event.records
    flag = bench.store.get(ref.id)
    assert isinstance(flag, ProtocolFlag)
    assert (flag.rule, flag.stage, flag.tool, flag.blocked) == (rule, "access", tool, True)
    return result.error.message


def _tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes (links as their target's name)."""
    out: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        key = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[key] = os.readlink(path).encode()
        elif path.is_file():
            out[key] = path.read_bytes()
    return out


# list_files


def test_list_files_recursively_with_types_and_sizes(any_bench: Bench) -> None:
    ws = any_bench.workspace
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "src" / "pkg" / "m.py").write_text("x = 1\n")
    (ws / "README.md").write_text("hi")
    (ws / "src" / "run.py").write_text("")
    value = any_bench.ok(Role.WORKER, "list_files")
    assert value["entries"] == [
        {"path": "README.md", "type": "file", "size": 2},
        {"path": "src", "type": "dir"},
        {"path": "src/pkg", "type": "dir"},
        {"path": "src/run.py", "type": "file", "size": 0},
        {"path": "src/pkg/m.py", "type": "file", "size": 6},
    ]
    assert (value["matched"], value["left_out"], value["complete"]) == (5, 0, True)
    by_name = any_bench.ok(Role.REVIEWER, "list_files", {"path": "src", "pattern": "*.py"})
    assert [e["path"] for e in by_name["entries"]] == ["src/run.py", "src/pkg/m.py"]
    by_path = any_bench.ok(Role.WORKER, "list_files", {"path": "src", "pattern": "pkg/*.py"})
    assert [e["path"] for e in by_path["entries"]] == ["src/pkg/m.py"]


def test_list_files_is_bounded_and_says_what_it_left_out(bench: Bench) -> None:
    for i in range(12):
        (bench.workspace / f"f{i:02}.txt").write_text("x")
    value = bench.ok(Role.WORKER, "list_files", {"limit": 5})
    assert [e["path"] for e in value["entries"]] == [f"f{i:02}.txt" for i in range(5)]
    assert (value["matched"], value["left_out"]) == (12, 7)
    bench.fail(Role.WORKER, "list_files", {"limit": 0}, code="invalid_arguments")


def test_list_files_shows_links_without_following_them(bench: Bench) -> None:
    outside = bench.workspace.parent / "secrets"
    outside.mkdir()
    (outside / "key.txt").write_text("k")
    os.symlink(outside, bench.workspace / "up")
    (bench.workspace / "real").mkdir()
    os.symlink(bench.workspace / "real", bench.workspace / "inner")
    entries = bench.ok(Role.WORKER, "list_files")["entries"]
    assert entries == [
        {"path": "inner", "type": "link"},
        {"path": "real", "type": "dir"},
        {"path": "up", "type": "link"},
    ]


def test_list_a_single_file(bench: Bench) -> None:
    (bench.workspace / "a.txt").write_text("abc")
    value = bench.ok(Role.WORKER, "list_files", {"path": "a.txt"})
    assert value["entries"] == [{"path": "a.txt", "type": "file", "size": 3}]


# read_file


def test_read_a_file(any_bench: Bench) -> None:
    (any_bench.workspace / "notes.md").write_text("héllo\nworld\n")
    value = any_bench.ok(Role.REVIEWER, "read_file", {"path": "notes.md"})
    assert value == {
        "path": "notes.md",
        "text": "héllo\nworld\n",
        "offset": 0,
        "next_offset": None,
        "total_bytes": 13,
    }


def test_read_pages_by_offset_without_splitting_a_character(bench: Bench) -> None:
    text = "ab€cd€" * 50  # '€' is three bytes in UTF-8
    (bench.workspace / "t.txt").write_text(text)
    pages: list[str] = []
    offset: int | None = 0
    while offset is not None:
        value = bench.ok(
            Role.WORKER, "read_file", {"path": "t.txt", "offset": offset, "max_bytes": 4}
        )
        assert "\ufffd" not in value["text"]
        assert value["total_bytes"] == len(text.encode())
        pages.append(value["text"])
        offset = value["next_offset"]
    assert "".join(pages) == text
    assert pages[:3] == ["ab", "€c", "d€"]
    end = len(text.encode())
    last = bench.ok(Role.WORKER, "read_file", {"path": "t.txt", "offset": end})
    assert (last["text"], last["next_offset"]) == ("", None)
    error = bench.fail(
        Role.WORKER, "read_file", {"path": "t.txt", "offset": end + 1}, code="invalid_arguments"
    )
    assert error.field == "offset"


def test_read_a_binary_file_is_refused_with_its_size_and_hash(bench: Bench) -> None:
    blob = b"\x89PNG\r\n\x00\x00" + bytes(range(256)) * 4
    (bench.workspace / "img.png").write_bytes(blob)
    error = bench.fail(Role.WORKER, "read_file", {"path": "img.png"}, code="invalid_arguments")
    assert "binary" in error.message
    assert str(len(blob)) in error.message
    assert hashlib.sha256(blob).hexdigest() in error.message


def test_read_a_folder_or_a_missing_file(bench: Bench) -> None:
    (bench.workspace / "d").mkdir()
    error = bench.fail(Role.WORKER, "read_file", {"path": "d"}, code="invalid_arguments")
    assert "folder" in error.message
    bench.fail(Role.WORKER, "read_file", {"path": "."}, code="invalid_arguments")
    bench.fail(Role.WORKER, "read_file", {"path": "nope.txt"}, code="not_found")


def test_read_a_fifo_does_not_hang(bench: Bench) -> None:
    os.mkfifo(bench.workspace / "pipe")
    error = bench.fail(Role.WORKER, "read_file", {"path": "pipe"}, code="invalid_arguments")
    assert "not a regular file" in error.message


# write_file


def test_write_creates_folders_and_returns_size_and_hash(any_bench: Bench) -> None:
    content = "def f():\n    return 'ü'\n"
    value = any_bench.ok(Role.WORKER, "write_file", {"path": "src/m.py", "content": content})
    data = content.encode()
    assert value == {
        "path": "src/m.py",
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "created": True,
    }
    assert (any_bench.workspace / "src" / "m.py").read_bytes() == data
    again = any_bench.ok(Role.HUMAN, "write_file", {"path": "src/m.py", "content": ""})
    assert again["created"] is False and again["bytes"] == 0
    assert (any_bench.workspace / "src" / "m.py").read_bytes() == b""
    any_bench.assert_verifies()


def test_write_without_create_dirs_needs_the_folder(bench: Bench) -> None:
    args = {"path": "new/x.txt", "content": "x", "create_dirs": False}
    error = bench.fail(Role.WORKER, "write_file", args, code="not_found")
    assert "create_dirs" in error.message
    assert not (bench.workspace / "new").exists()


def test_write_replaces_atomically_and_keeps_the_mode(bench: Bench) -> None:
    script = bench.workspace / "run.sh"
    script.write_text("old\n")
    script.chmod(0o755)
    before = script.stat().st_ino
    bench.ok(Role.WORKER, "write_file", {"path": "run.sh", "content": "new\n"})
    after = script.stat()
    assert script.read_text() == "new\n"
    assert after.st_ino != before  # a new file renamed into place, not rewritten in place
    assert after.st_mode & 0o777 == 0o755
    assert sorted(p.name for p in bench.workspace.iterdir()) == ["run.sh"]  # no temp left


def test_a_failed_write_leaves_the_old_file_and_no_temp(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = bench.workspace / "keep.txt"
    target.write_text("precious")

    def no_space(fd: int, data: Any) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_nofollow.os, "write", no_space)
    error = bench.fail(
        Role.WORKER, "write_file", {"path": "keep.txt", "content": "new"}, code="tool_failed"
    )
    assert "No space left" in error.message
    assert _tree(bench.workspace) == {"keep.txt": b"precious"}


def test_write_size_is_bounded(bench: Bench) -> None:
    big = "€" * (400 * 1024)  # fewer than 1 Mi characters, more than 1 MiB as UTF-8
    error = bench.fail(
        Role.WORKER, "write_file", {"path": "a.txt", "content": big}, code="invalid_arguments"
    )
    assert error.field == "content" and "at most" in error.message
    error = bench.fail(
        Role.WORKER,
        "write_file",
        {"path": "a.txt", "content": "x" * (1024 * 1024 + 1)},
        code="invalid_arguments",
    )
    assert error.field == "content"
    assert not (bench.workspace / "a.txt").exists()


def test_write_through_a_symlink_is_refused(bench: Bench) -> None:
    (bench.workspace / "real.txt").write_text("real")
    os.symlink(bench.workspace / "real.txt", bench.workspace / "alias.txt")
    message = _refused(
        bench, Role.WORKER, "write_file", {"path": "alias.txt", "content": "x"}, "symlink_write"
    )
    assert "symbolic link" in message
    assert (bench.workspace / "real.txt").read_text() == "real"
    assert (bench.workspace / "alias.txt").is_symlink()


# the controller's folders, named here rather than read from the code under test
@pytest.mark.parametrize("folder", ["data-in", "runs", ".rsilab"])
def test_write_into_a_reserved_folder_is_refused(bench: Bench, folder: str) -> None:
    (bench.workspace / folder).mkdir()
    for path in (f"{folder}/x.txt", folder, f"sub/../{folder}/y"):
        args = {"path": path, "content": "x"}
        message = _refused(bench, Role.WORKER, "write_file", args, "reserved_path")
        assert "controller" in message
    os.symlink(bench.workspace / folder, bench.workspace / "sneaky")
    _refused(
        bench, Role.WORKER, "write_file", {"path": "sneaky/z", "content": "x"}, "reserved_path"
    )
    assert list((bench.workspace / folder).iterdir()) == []


def test_write_onto_a_folder_fails(bench: Bench) -> None:
    (bench.workspace / "d").mkdir()
    bench.fail(Role.WORKER, "write_file", {"path": "d", "content": "x"}, code="invalid_arguments")
    bench.fail(Role.WORKER, "write_file", {"path": ".", "content": "x"}, code="invalid_arguments")


# escapes, for every tool


@pytest.mark.parametrize(
    ("tool", "extra"),
    [
        ("list_files", {}),
        ("read_file", {}),
        ("write_file", {"content": "pwned"}),
    ],
)
def test_escapes_are_refused_and_flagged(bench: Bench, tool: str, extra: dict[str, Any]) -> None:
    outside = bench.workspace.parent / "outside.txt"
    outside.write_text("secret")
    os.symlink(outside, bench.workspace / "link.txt")
    os.symlink(bench.workspace.parent, bench.workspace / "up")
    for path in (
        "../outside.txt",
        str(outside),
        "sub/../../outside.txt",
        "link.txt",
        "up/outside.txt",
    ):
        _refused(bench, Role.WORKER, tool, {"path": path, **extra}, "path_outside_workspace")
    assert outside.read_text() == "secret"


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("list_files", {}),
        ("read_file", {"path": "a.txt"}),
        ("write_file", {"path": "a.txt", "content": "x"}),
        ("apply_patch", {"patch": "--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+x\n"}),
    ],
)
def test_no_workspace_is_refused_and_flagged(bench: Bench, tool: str, args: dict[str, Any]) -> None:
    ctx = bench.ctx(Role.WORKER, workspace=None)
    result = bench.call(ctx, tool, args)
    assert result.error is not None and result.error.code == "guard_refused"
    (ref,) = bench.last_event().records
    flag = bench.store.get(ref.id)
    assert isinstance(flag, ProtocolFlag) and flag.rule == "no_workspace"


def test_a_link_planted_after_the_check_is_not_followed(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job racing the tool swaps a checked folder for a link out; the open refuses it."""
    outside = bench.workspace.parent / "out"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (bench.workspace / "d").mkdir()
    (bench.workspace / "d" / "secret.txt").write_text("fine")
    real_open_dir = _nofollow.open_dir

    def swap_then_open(root: Path, parts: Any, **kwargs: Any) -> int:
        if parts and not (bench.workspace / "d").is_symlink():
            (bench.workspace / "d" / "secret.txt").unlink()
            (bench.workspace / "d").rmdir()
            os.symlink(outside, bench.workspace / "d")
        return real_open_dir(root, parts, **kwargs)

    monkeypatch.setattr(_nofollow, "open_dir", swap_then_open)
    _refused(bench, Role.WORKER, "read_file", {"path": "d/secret.txt"}, "symlink_in_path")


# roles


@pytest.mark.parametrize(
    ("role", "tool"),
    [
        (Role.MAIN, "read_file"),
        (Role.LEADER, "list_files"),
        (Role.CONTROLLER, "read_file"),
        (Role.REVIEWER, "write_file"),
        (Role.REVIEWER, "apply_patch"),
        (Role.MAIN, "apply_patch"),
    ],
)
def test_roles_not_allowed_are_refused(bench: Bench, role: Role, tool: str) -> None:
    (bench.workspace / "a.txt").write_text("a\n")
    args = {
        "list_files": {},
        "read_file": {"path": "a.txt"},
        "write_file": {"path": "a.txt", "content": "b\n"},
        "apply_patch": {"patch": "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n"},
    }[tool]
    bench.fail(role, tool, args, code="permission_denied")
    (ref,) = bench.last_event().records
    flag = bench.store.get(ref.id)
    assert isinstance(flag, ProtocolFlag) and flag.rule == "tool_not_allowed_for_role"
    assert (bench.workspace / "a.txt").read_text() == "a\n"


# apply_patch


# The blank context lines are written empty, as editors that strip trailing spaces leave them.
GIT_PATCH = """\
diff --git a/src/model.py b/src/model.py
index 3b18e51..a9c2f3e 100644
--- a/src/model.py
+++ b/src/model.py
@@ -1,4 +1,5 @@
 import math
-WIDTH = 64
+WIDTH = 128
+DEPTH = 4

 def f(x):
@@ -7,3 +8,3 @@ def f(x):

-# end
+# the end
 # really
diff --git a/notes/new.md b/notes/new.md
new file mode 100644
index 0000000..e69de29
--- /dev/null
+++ b/notes/new.md
@@ -0,0 +1,2 @@
+# Notes
+wider is better
diff --git a/old.txt b/old.txt
deleted file mode 100644
index 1111111..0000000
--- a/old.txt
+++ /dev/null
@@ -1,2 +0,0 @@
-gone
-soon
"""

MODEL = "import math\nWIDTH = 64\n\ndef f(x):\n    return x\n\n\n# end\n# really\n"


def test_a_patch_adds_modifies_and_deletes_files(any_bench: Bench) -> None:
    ws = any_bench.workspace
    (ws / "src").mkdir()
    (ws / "src" / "model.py").write_text(MODEL)
    (ws / "old.txt").write_text("gone\nsoon\n")
    value = any_bench.ok(Role.WORKER, "apply_patch", {"patch": GIT_PATCH})
    new_model = MODEL.replace("WIDTH = 64\n", "WIDTH = 128\nDEPTH = 4\n").replace(
        "# end", "# the end"
    )
    assert (ws / "src" / "model.py").read_text() == new_model
    assert (ws / "notes" / "new.md").read_text() == "# Notes\nwider is better\n"
    assert not (ws / "old.txt").exists()
    assert value["files"] == [
        {
            "path": "src/model.py",
            "action": "modified",
            "added": 3,
            "removed": 2,
            "sha256": hashlib.sha256(new_model.encode()).hexdigest(),
        },
        {
            "path": "notes/new.md",
            "action": "created",
            "added": 2,
            "removed": 0,
            "sha256": hashlib.sha256(b"# Notes\nwider is better\n").hexdigest(),
        },
        {"path": "old.txt", "action": "deleted", "added": 0, "removed": 2, "sha256": None},
    ]
    any_bench.assert_verifies()


_lines = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "\n", " x\n", "-y\n", "+z\n"]), max_size=30)


@settings(max_examples=300, deadline=None)
@given(_lines, _lines, st.integers(min_value=0, max_value=3))
def test_any_difflib_patch_turns_old_into_new(old: list[str], new: list[str], n: int) -> None:
    """The applier agrees with difflib on every edit, lines that look like diff syntax too."""
    import difflib

    patch = "".join(difflib.unified_diff(old, new, "a/f", "b/f", n=n))
    if not patch:
        return
    (fp,) = _unidiff.parse(patch)
    assert _unidiff.apply(old, fp) == new


def test_a_difflib_patch_applies_at_an_offset(bench: Bench) -> None:
    import difflib

    old = [f"line {i}\n" for i in range(40)]
    new = [*old[:20], "inserted\n", *old[21:]]
    patch = "".join(difflib.unified_diff(old, new, "a/f.txt", "b/f.txt"))
    (bench.workspace / "f.txt").write_text("".join(["header\n"] * 5 + old))  # 5 lines moved
    bench.ok(Role.WORKER, "apply_patch", {"patch": patch})
    assert (bench.workspace / "f.txt").read_text() == "".join(["header\n"] * 5 + new)


def test_no_newline_at_end_of_file(bench: Bench) -> None:
    (bench.workspace / "a.txt").write_text("one\ntwo")
    patch = (
        "--- a.txt\t2024-01-01 00:00:00\n+++ a.txt\t2024-01-02 00:00:00\n"
        "@@ -1,2 +1,2 @@\n one\n-two\n\\ No newline at end of file\n+two\n"
    )
    bench.ok(Role.WORKER, "apply_patch", {"patch": patch})
    assert (bench.workspace / "a.txt").read_text() == "one\ntwo\n"


def test_a_failing_hunk_leaves_every_file_untouched(bench: Bench) -> None:
    ws = bench.workspace
    (ws / "src").mkdir()
    (ws / "src" / "model.py").write_text(MODEL.replace("# end", "# END"))  # hunk 2 fails
    (ws / "old.txt").write_text("gone\nsoon\n")
    before = _tree(ws)
    error = bench.fail(Role.WORKER, "apply_patch", {"patch": GIT_PATCH}, code="conflict")
    assert _tree(ws) == before
    assert not (ws / "notes").exists()
    assert "hunk 2" in error.message and "src/model.py" in error.message
    assert "'# END\\n'" in error.message and "Nothing was changed" in error.message
    (detail,) = error.details
    assert detail["file"] == "src/model.py" and detail["hunk"] == 2
    assert detail["expected"] == ["", "# end", "# really"]
    assert detail["actual"] == ["", "# END", "# really"]


def test_a_failing_later_file_leaves_earlier_files_untouched(bench: Bench) -> None:
    ws = bench.workspace
    (ws / "src").mkdir()
    (ws / "src" / "model.py").write_text(MODEL)
    (ws / "old.txt").write_text("gone\nsoon\nand more\n")  # the deletion leaves a line
    before = _tree(ws)
    error = bench.fail(Role.WORKER, "apply_patch", {"patch": GIT_PATCH}, code="conflict")
    assert "old.txt" in error.message
    assert _tree(ws) == before


def test_patch_conflicts_on_existing_and_missing_files(bench: Bench) -> None:
    (bench.workspace / "a.txt").write_text("x\n")
    create = "--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+y\n"
    bench.fail(Role.WORKER, "apply_patch", {"patch": create}, code="conflict")
    change = "--- a/missing.txt\n+++ b/missing.txt\n@@ -1 +1 @@\n-x\n+y\n"
    bench.fail(Role.WORKER, "apply_patch", {"patch": change}, code="not_found")
    assert (bench.workspace / "a.txt").read_text() == "x\n"


@pytest.mark.parametrize(
    "patch",
    [
        "",
        "just some words\n",
        "@@ -1 +1 @@\n-a\n+b\n",  # no file header
        "--- a/a.txt\n+++ b/a.txt\n",  # no hunk
        "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n-a\n+b\n",  # counts too big
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n+c\n",  # counts too small
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n*a\n+b\n",  # not a hunk line
        "--- a/a.txt\n+++ b/a.txt\n@@ bad @@\n-a\n+b\n",
        "--- a/a.txt\n+++ b/c.txt\n@@ -1 +1 @@\n-a\n+b\n",  # a rename
        "diff --git a/a.txt b/c.txt\nsimilarity index 100%\nrename from a.txt\nrename to c.txt\n",
        "Binary files a/x.bin and b/x.bin differ\n",
        "--- /dev/null\n+++ /dev/null\n@@ -0,0 +1 @@\n+a\n",
        '--- "a/a b.txt"\n+++ "b/a b.txt"\n@@ -1 +1 @@\n-a\n+b\n',
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n--- a/a.txt\n+++ b/a.txt\n"
        "@@ -1 +1 @@\n-b\n+c\n",  # the same file twice
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n--- a/./a.txt\n+++ b/./a.txt\n"
        "@@ -1 +1 @@\n-b\n+c\n",  # the same file twice, spelt differently
    ],
)
def test_malformed_patches_are_invalid_arguments(bench: Bench, patch: str) -> None:
    (bench.workspace / "a.txt").write_text("a\n")
    error = bench.fail(Role.WORKER, "apply_patch", {"patch": patch}, code="invalid_arguments")
    assert error.field == "patch"
    assert (bench.workspace / "a.txt").read_text() == "a\n"


def test_a_binary_file_is_not_patched(bench: Bench) -> None:
    (bench.workspace / "b.bin").write_bytes(b"a\x00\n")
    patch = "--- a/b.bin\n+++ b/b.bin\n@@ -1 +1 @@\n-a\n+b\n"
    error = bench.fail(Role.WORKER, "apply_patch", {"patch": patch}, code="invalid_arguments")
    assert "text" in error.message


@pytest.mark.parametrize(
    "target", ["../outside.txt", "sub/../../outside.txt", "OUTSIDE_ABS", "link.txt"]
)
def test_a_patch_out_of_the_workspace_is_refused_and_flagged(bench: Bench, target: str) -> None:
    ws = bench.workspace
    outside = ws.parent / "outside.txt"
    outside.write_text("secret\n")
    os.symlink(outside, ws / "link.txt")
    (ws / "a.txt").write_text("a\n")
    target = str(outside) if target == "OUTSIDE_ABS" else target
    patch = (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n"
        f"--- {target}\n+++ {target}\n@@ -1 +1 @@\n-secret\n+pwned\n"
    )
    _refused(bench, Role.WORKER, "apply_patch", {"patch": patch}, "path_outside_workspace")
    assert outside.read_text() == "secret\n"
    assert (ws / "a.txt").read_text() == "a\n"
    create = "--- /dev/null\n+++ b/../new.txt\n@@ -0,0 +1 @@\n+x\n"
    _refused(bench, Role.WORKER, "apply_patch", {"patch": create}, "path_outside_workspace")
    assert not (ws.parent / "new.txt").exists()


def test_a_patch_through_an_inner_symlink_or_into_reserved_folders_is_refused(
    bench: Bench,
) -> None:
    ws = bench.workspace
    (ws / "real.txt").write_text("a\n")
    os.symlink(ws / "real.txt", ws / "alias.txt")
    patch = "--- a/alias.txt\n+++ b/alias.txt\n@@ -1 +1 @@\n-a\n+b\n"
    _refused(bench, Role.WORKER, "apply_patch", {"patch": patch}, "symlink_write")
    (ws / "data-in").mkdir()
    (ws / "data-in" / "train.csv").write_text("1\n")
    patch = "--- a/data-in/train.csv\n+++ b/data-in/train.csv\n@@ -1 +1 @@\n-1\n+2\n"
    _refused(bench, Role.WORKER, "apply_patch", {"patch": patch}, "reserved_path")
    assert (ws / "data-in" / "train.csv").read_text() == "1\n"
    assert (ws / "real.txt").read_text() == "a\n"
