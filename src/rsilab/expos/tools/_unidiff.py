"""A small strict unified-diff parser and applier, on text only (no file system).

Accepts what ``diff -u`` and ``git diff`` print: ``---``/``+++`` file headers (``a/`` and
``b/`` prefixes stripped when both sides carry them, ``/dev/null`` for created and deleted
files, a tab and timestamp after the name ignored), ``@@ -l,s +l,s @@`` hunks whose line counts
must be right, and ``\\ No newline at end of file`` markers. Git metadata lines between files
(``diff --git``, ``index``, modes) are skipped; renames, copies and binary patches are refused.

Applying is like ``patch`` with fuzz 0: every context and removed line must match exactly,
at the stated line or, nearest first, within :data:`MAX_OFFSET` lines of it (after the drift
of the previous hunk); hunks apply in order and never overlap.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from rsilab.errors import ToolError

MAX_OFFSET = 100
"""How many lines away from its stated position a hunk may be found."""

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_REFUSED = {
    "rename from ": "renames are not supported; delete the old file and create the new one",
    "copy from ": "copies are not supported; create the new file with its full content",
    "Binary files ": "binary files cannot be patched; use write_file for text files only",
    "GIT binary patch": "binary patches are not supported",
}
_SHOW_LINES = 8
_SHOW_CHARS = 200


def _bad(message: str) -> ToolError:
    return ToolError(
        "invalid_arguments",
        message,
        field="patch",
        expected="a unified diff as `diff -u` or `git diff` prints it",
    )


@dataclass
class Hunk:
    """One ``@@`` block: its header numbers and (tag, line) pairs, lines with their newline."""

    number: int
    header: str
    old_start: int
    old_len: int
    lines: list[tuple[str, str]] = field(default_factory=list)

    @property
    def old(self) -> list[str]:
        """The lines the hunk expects in the file (context and removed)."""
        return [text for tag, text in self.lines if tag != "+"]

    @property
    def new(self) -> list[str]:
        """The lines that replace them (context and added)."""
        return [text for tag, text in self.lines if tag != "-"]


@dataclass
class FilePatch:
    """The hunks for one file. ``old_path`` None: created; ``new_path`` None: deleted."""

    old_path: str | None
    new_path: str | None
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def path(self) -> str:
        """The workspace path the patch changes, as written in the patch (prefixes stripped)."""
        found = self.new_path if self.new_path is not None else self.old_path
        assert found is not None  # parse() refuses /dev/null on both sides
        return found

    @property
    def added(self) -> int:
        return sum(tag == "+" for h in self.hunks for tag, _ in h.lines)

    @property
    def removed(self) -> int:
        return sum(tag == "-" for h in self.hunks for tag, _ in h.lines)


def split_lines(text: str) -> list[str]:
    """``text`` as lines that keep their ``\\n`` (only ``\\n`` ends a line, as in diff)."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def parse(patch: str) -> list[FilePatch]:
    """The file patches in ``patch``; ToolError ``invalid_arguments`` (field ``patch``) if bad."""
    lines = split_lines(patch)
    lines = [line.removesuffix("\n") for line in lines]
    files: list[FilePatch] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        for prefix, why in _REFUSED.items():
            if line.startswith(prefix):
                raise _bad(f"line {i + 1}: {why}")
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            fp, i = _parse_file(lines, i)
            files.append(fp)
        elif line.startswith("@@"):
            raise _bad(f"line {i + 1}: a hunk before any '--- a/PATH' / '+++ b/PATH' header")
        else:
            i += 1  # git metadata or leading text, as `patch` skips it
    if not files:
        raise _bad("no file changes found: expected '--- a/PATH', '+++ b/PATH' and '@@' hunks")
    return files


def _header_path(line: str) -> str | None:
    raw = line[4:].split("\t", 1)[0].rstrip()
    if raw == "/dev/null":
        return None
    if raw.startswith('"'):
        raise _bad(f"quoted path {raw} is not supported; use plain names")
    if not raw:
        raise _bad(f"a file header without a path: {line!r}")
    return raw


def _strip_prefixes(old: str | None, new: str | None) -> tuple[str | None, str | None]:
    if old is not None and new is not None:
        if old.startswith("a/") and new.startswith("b/"):
            return old[2:], new[2:]
        return old, new
    if old is None and new is not None and new.startswith("b/"):
        return None, new[2:]
    if new is None and old is not None and old.startswith("a/"):
        return old[2:], None
    return old, new


def _parse_file(lines: list[str], i: int) -> tuple[FilePatch, int]:
    old, new = _strip_prefixes(_header_path(lines[i]), _header_path(lines[i + 1]))
    if old is None and new is None:
        raise _bad(f"line {i + 1}: both sides are /dev/null")
    if old is not None and new is not None and old != new:
        raise _bad(
            f"line {i + 1}: '---' names {old!r} but '+++' names {new!r}; renames are not "
            "supported, so both must name the same file"
        )
    fp = FilePatch(old, new)
    i += 2
    while i < len(lines) and lines[i].startswith("@@"):
        hunk, i = _parse_hunk(lines, i, len(fp.hunks) + 1)
        fp.hunks.append(hunk)
    if not fp.hunks:
        raise _bad(f"no '@@' hunk after the header of {fp.path!r}")
    if i < len(lines) and lines[i][:1] in ("+", "-", " ") and not _is_header(lines, i):
        raise _bad(
            f"line {i + 1}: hunk {len(fp.hunks)} of {fp.path!r} has more lines than its "
            f"header counts ({fp.hunks[-1].header}); fix the counts"
        )
    return fp, i


def _is_header(lines: list[str], i: int) -> bool:
    return lines[i].startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")


def _parse_hunk(lines: list[str], i: int, number: int) -> tuple[Hunk, int]:
    match = _HUNK.match(lines[i])
    if match is None:
        raise _bad(f"line {i + 1}: bad hunk header {lines[i][:80]!r}; expected '@@ -l,s +l,s @@'")
    old_len = 1 if match.group(2) is None else int(match.group(2))
    new_len = 1 if match.group(4) is None else int(match.group(4))
    hunk = Hunk(number, match.group(0), int(match.group(1)), old_len)
    need_old, need_new = old_len, new_len
    i += 1
    while need_old > 0 or need_new > 0:
        if i >= len(lines):
            raise _bad(f"the patch ends inside hunk {hunk.header}; are its line counts right?")
        line = lines[i]
        tag, text = (line[:1], line[1:]) if line else (" ", "")  # an emptied context line
        i += 1
        if tag == "\\":
            _no_newline(hunk, i)
            continue
        if tag not in (" ", "-", "+"):
            raise _bad(
                f"line {i}: {line[:80]!r} in hunk {hunk.header} starts with none of "
                "' ', '-', '+'; are the hunk's line counts right?"
            )
        if tag != "+":
            need_old -= 1
        if tag != "-":
            need_new -= 1
        if need_old < 0 or need_new < 0:
            raise _bad(f"line {i}: hunk {hunk.header} has more lines than its header counts")
        hunk.lines.append((tag, text + "\n"))
    if i < len(lines) and lines[i].startswith("\\"):
        i += 1
        _no_newline(hunk, i)
    return hunk, i


def _no_newline(hunk: Hunk, lineno: int) -> None:
    if not hunk.lines:
        raise _bad(f"line {lineno}: '\\ No newline at end of file' before any hunk line")
    tag, text = hunk.lines[-1]
    hunk.lines[-1] = (tag, text.removesuffix("\n"))


def apply(original: Sequence[str], fp: FilePatch) -> list[str]:
    """``original`` (lines with newlines) with ``fp``'s hunks applied.

    Raises ToolError ``conflict`` naming the hunk that does not match, with the expected and
    the actual lines (bounded) in ``details``.
    """
    out: list[str] = []
    cursor = 0  # first original line not yet copied or replaced
    drift = 0  # how far from its header the previous hunk applied
    for hunk in fp.hunks:
        stated = hunk.old_start - 1 if hunk.old_len else hunk.old_start
        want = stated + drift
        old = hunk.old
        pos = _find(original, old, want, cursor)
        if pos is None:
            raise _mismatch(fp.path, hunk, original, max(min(want, len(original)), cursor))
        drift = pos - stated
        out += original[cursor:pos]
        out += hunk.new
        cursor = pos + len(old)
    out += original[cursor:]
    return out


def _find(lines: Sequence[str], old: list[str], want: int, cursor: int) -> int | None:
    last = len(lines) - len(old)
    for distance in range(MAX_OFFSET + 1):
        for pos in (want - distance, want + distance) if distance else (want,):
            if cursor <= pos <= last and list(lines[pos : pos + len(old)]) == old:
                return pos
    return None


def _show(lines: Sequence[str]) -> list[str]:
    shown = [line.removesuffix("\n")[:_SHOW_CHARS] for line in lines[:_SHOW_LINES]]
    if len(lines) > _SHOW_LINES:
        shown.append(f"... ({len(lines) - _SHOW_LINES} more lines)")
    return shown


def _mismatch(path: str, hunk: Hunk, original: Sequence[str], at: int) -> ToolError:
    expected = hunk.old
    actual = list(original[at : at + len(expected)])
    first = next(
        (k for k, (e, a) in enumerate(zip(expected, actual, strict=False)) if e != a),
        min(len(expected), len(actual)),
    )
    if first < len(expected) and first < len(actual):
        diff = f"line {at + first + 1} is {actual[first]!r}, the hunk expects {expected[first]!r}"
    elif first < len(expected):
        diff = f"the file ends at line {len(original)} before the hunk's lines do"
    else:
        diff = "it matches there, but overlaps the previous hunk"
    return ToolError(
        "conflict",
        f"hunk {hunk.number} ({hunk.header}) of {path!r} does not match the file within "
        f"{MAX_OFFSET} lines of line {at + 1}: {diff}. Nothing was changed; read the file "
        "again and redo the patch against its current content.",
        field="patch",
        details=[
            {
                "file": path,
                "hunk": hunk.number,
                "line": at + 1,
                "expected": _show(expected),
                "actual": _show(actual),
            }
        ],
    )
