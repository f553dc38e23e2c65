"""The leak search run inside a sandbox (stdlib only; read as text, run as ``python -I -c``).

See ``rsilab.tasks._probe`` for its input and output. Never imported by rsilab itself.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import sys
import time
from typing import Any

SKIP = ("/proc", "/sys", "/dev")


def emit(**item: Any) -> None:
    print(json.dumps(item), flush=True)


def walk(roots: list[str], names: set[str], limit: int, deadline: float) -> tuple[list[str], bool]:
    """Files to search, in walk order; reports files named like a data source on the way."""
    files: list[str] = []
    seen: set[tuple[int, int]] = set()
    stack = list(reversed(roots))
    while stack:
        if time.monotonic() > deadline:
            return files, True
        folder = stack.pop()
        if folder in SKIP:
            continue
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name, reverse=True)
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    info = entry.stat(follow_symlinks=False)
                    if (info.st_dev, info.st_ino) in seen:
                        continue
                    seen.add((info.st_dev, info.st_ino))
                    if entry.name in names:
                        emit(path=entry.path, kind="name", label="data source file name")
                    if info.st_size <= limit:
                        files.append(entry.path)
            except OSError:
                pass
    return files, False


def squeeze(text: bytes) -> bytes:
    """``text`` with every run of whitespace made one space."""
    return b" ".join(text.split())


def loose(needle: bytes) -> bytes:
    """A pattern for ``needle`` in which each space matches any run of whitespace, so a text
    whose line breaks and indentation were collapsed (a cleaned docstring) is still found in
    the file it came from."""
    return rb"\s+".join(re.escape(word) for word in needle.split())


def read(path: str, limit: int) -> bytes:
    """Up to ``limit`` bytes of ``path``, decompressed when it is gzip."""
    with open(path, "rb") as handle:
        data = handle.read(limit)
    if data[:2] == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as packed:
                data = packed.read(limit)
        except (OSError, EOFError):
            pass
    return data


def main() -> None:
    spec = json.loads(sys.stdin.read())
    start = time.monotonic()
    labels = {squeeze(t.encode()): label for label, t in spec["needles"] if squeeze(t.encode())}
    pattern = re.compile(b"|".join(loose(k) for k in sorted(labels, key=len, reverse=True)))
    limit = int(spec["max_bytes"])
    for path in spec["paths"]:
        if os.path.lexists(path):
            emit(path=path, kind="path", label="declared data source")
    budget = float(spec["seconds"])
    files, truncated = walk(spec["roots"], set(spec["names"]), limit, start + budget / 2)
    searched = 0
    for path in files if labels else []:
        if time.monotonic() > start + budget:
            truncated = True
            break
        try:
            match = pattern.search(read(path, limit))
        except OSError:
            continue
        searched += 1
        if match:
            emit(path=path, kind="content", label=labels[squeeze(match.group(0))])
    emit(done=True, files=searched, listed=len(files), truncated=truncated)


if __name__ == "__main__":
    main()
