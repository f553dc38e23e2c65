"""Docstrings of the standard library, read from its source with :mod:`ast` (nothing imported).

Walk order is fixed (modules sorted, files sorted, definitions in source order), so the same
Python build always yields the same docstrings in the same order. Cleaning rules, applied to
each docstring after :func:`inspect.cleandoc` (via ``ast.get_docstring``):

1. split into paragraphs at blank lines;
2. drop every paragraph holding a doctest prompt (``>>>``): examples are code, not prose;
3. collapse runs of whitespace inside a paragraph to one space.
"""

from __future__ import annotations

import ast
import re
import sysconfig
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rsilab.tasks.builtin.textcls._families import EXCLUDED_DIRS

_Def = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
_BLANK_LINE = re.compile(r"\n\s*\n")


@dataclass(frozen=True)
class Doc:
    """One cleaned docstring and where it came from."""

    top: str
    """Top-level module or package, e.g. ``email``."""
    path: str
    """Source file relative to the stdlib folder, e.g. ``email/utils.py``."""
    qualname: str
    """Qualified name of the documented object; ``""`` for the module itself."""
    paragraphs: tuple[str, ...]
    """Cleaned paragraphs, in order; never empty."""


def stdlib_dir() -> Path:
    """The running interpreter's stdlib source folder (``sysconfig``'s ``stdlib`` path)."""
    return Path(sysconfig.get_paths()["stdlib"])


def module_files(stdlib: Path, top: str) -> list[Path]:
    """Source files of one top-level module or package, sorted; ``[]`` when absent."""
    single = stdlib / f"{top}.py"
    if single.is_file():
        return [single]
    package = stdlib / top
    if not package.is_dir():
        return []
    return sorted(
        p
        for p in package.rglob("*.py")
        if not EXCLUDED_DIRS.intersection(p.relative_to(stdlib).parts)
    )


def clean(docstring: str) -> tuple[str, ...]:
    """Paragraphs of an already dedented docstring, by the rules in the module docstring."""
    paragraphs = []
    for block in _BLANK_LINE.split(docstring):
        if ">>>" in block:
            continue
        text = " ".join(block.split())
        if text:
            paragraphs.append(text)
    return tuple(paragraphs)


def _walk(body: list[ast.stmt], prefix: str) -> Iterator[tuple[str, _Def]]:
    for node in body:
        if isinstance(node, _Def):
            name = f"{prefix}{node.name}"
            yield name, node
            yield from _walk(node.body, f"{name}.")


def file_docs(stdlib: Path, top: str, path: Path) -> Iterator[Doc]:
    """Every non-empty docstring of one file: the module's first, then definitions in order."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError):  # e.g. lib2to3 fixtures; never in the mapped modules
        return
    rel = path.relative_to(stdlib).as_posix()
    nodes: list[tuple[str, ast.Module | _Def]] = [("", tree), *_walk(tree.body, "")]
    for qualname, node in nodes:
        raw = ast.get_docstring(node, clean=True)
        paragraphs = clean(raw) if raw else ()
        if paragraphs:
            yield Doc(top, rel, qualname, paragraphs)


def iter_docs(tops: Iterable[str], stdlib: Path | None = None) -> Iterator[Doc]:
    """Docstrings of the given top-level modules, modules in sorted order."""
    root = stdlib or stdlib_dir()
    for top in sorted(tops):
        for path in module_files(root, top):
            yield from file_docs(root, top, path)
