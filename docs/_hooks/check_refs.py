"""Stale-reference check: every name the docs cite in code must still exist.

Run on every page's Markdown before it is rendered. A problem is a warning, which
``mkdocs build --strict`` turns into a failed build. Checked, in inline code and in the
command lines of ``sh``/``console`` blocks:

- ``rsilab.x.y``: a module, or an attribute of one, that imports;
- ``src/rsilab/...`` (or ``rsilab/...``), ``tests/...``, ``benchmarks/...``, ``docs/...``: a
  path that exists;
- ``rsilab CMD [SUB] --opt``: a command of the Typer app, and options it has;
- ``make TARGET``: a target of the Makefile.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import gen_cli

ROOT = Path(__file__).resolve().parents[2]

_FENCE = re.compile(r"^(```|~~~)(\w*).*?^\1[ \t]*$", re.M | re.S)
_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_DOTTED = re.compile(r"^rsilab(\.[A-Za-z_]\w*)+(\(\))?$")
_PATH = re.compile(
    r"^(?:(?:src/rsilab|tests|benchmarks|docs)(?:/[\w.*-]+)*|rsilab(?:/[\w.*-]+)+)/?$"
)
_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
_FILE_SUFFIXES = {"toml", "md", "py", "db", "json", "key", "txt"}
_SHELL_FENCES = {"sh", "bash", "console", "shell"}


def _python_name(text: str) -> str | None:
    parts = text.removesuffix("()").split(".")
    if parts[-1] in _FILE_SUFFIXES:
        return None  # a file name such as rsilab.toml
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return f"`{text}`: {'.'.join(parts[:cut])} has no attribute {attr!r}"
            obj = getattr(obj, attr)
        return None
    return f"`{text}`: no such module"


def _path(text: str) -> str | None:
    where = f"src/{text}" if text.startswith("rsilab/") else text
    if "*" in text or (ROOT / where.rstrip("/")).exists():
        return None
    return f"`{text}`: no such file or folder in the repository"


def _command(text: str) -> str | None:
    words = text.split()
    known = gen_cli.commands()
    if len(words) < 2 or words[1].startswith("-") or not words[1].islower():
        return None  # `rsilab --help`, `rsilab COMMAND`: nothing specific named
    name = words[1]
    if name in gen_cli.groups():
        if len(words) < 3 or not re.fullmatch(r"[a-z]+", words[2]):
            return None  # the group alone, or a placeholder for its sub-command
        name = f"{name} {words[2]}"
    if name not in known:
        return f"`{text}`: `rsilab {name}` is not a command"
    own_part = text.split(" -- ", 1)[0]  # after `--` come another program's arguments
    unknown = sorted(set(_OPTION.findall(own_part)) - gen_cli.option_names(name))
    return f"`{text}`: `rsilab {name}` has no option {', '.join(unknown)}" if unknown else None


def _make(text: str) -> str | None:
    words = text.split()
    targets = re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text("utf-8"), re.M)
    for word in words[1:]:
        if word.startswith("-") or "=" in word:
            continue
        if word not in targets:
            return f"`{text}`: the Makefile has no target {word!r}"
    return None


def check_text(text: str) -> str | None:
    """What is stale in one code span or command line; None when nothing is."""
    text = text.strip()
    if _DOTTED.match(text):
        return _python_name(text)
    if _PATH.match(text):
        return _path(text)
    if text.startswith("rsilab ") and re.match(r"^rsilab [a-z-]", text):
        return _command(text)
    if text.startswith("make ") and re.match(r"^make [a-z]", text):
        return _make(text)
    return None


def problems(markdown: str) -> list[str]:
    """Every stale reference in a page's Markdown."""
    found = []
    for match in _FENCE.finditer(markdown):
        if match.group(2) in _SHELL_FENCES:
            for line in match.group(0).splitlines()[1:-1]:
                line = line.strip().removeprefix("$ ").split("  #", 1)[0]
                found.append(check_text(line))
    prose = _FENCE.sub("", markdown)
    found += [check_text(span) for span in _SPAN.findall(prose)]
    return [p for p in found if p is not None]
