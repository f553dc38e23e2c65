"""The lab's own settings: the ``[lab]`` table of ``<lab>/rsilab.toml``.

```toml
[lab]
size_limit = "2G"   # bytes, or a number with K, M, G or T (powers of 1024), optional B or iB
gc_keep_top = 3     # candidates outside a lineage whose models and logs gc keeps
```

A missing file or key means the default: no size limit, ``gc_keep_top`` 3. The controller
reads the file when it needs it, so an edit takes effect on the next read. Other tables of the
file (``[llm]``) belong to other parts of rsilab and are read with :func:`settings_table`.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rsilab.errors import UserError

SETTINGS_FILE = "rsilab.toml"
DEFAULT_KEEP_TOP = 3
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:([kmgt])(?:i?b)?|b)?\s*$", re.IGNORECASE)
_UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


@dataclass(frozen=True)
class LabSettings:
    """The ``[lab]`` table; ``size_limit`` (bytes) None means no limit."""

    size_limit: int | None = None
    keep_top: int = DEFAULT_KEEP_TOP


def parse_size(value: str | int) -> int:
    """Bytes in ``2048``, ``"512M"``, ``"2G"``, ``"1.5GiB"`` (K, M, G, T: powers of 1024).

    Raises:
        ValueError: not a size.
    """
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    match = _SIZE.match(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"{value!r} is not a size; write bytes, or e.g. '500M' or '2G'")
    unit = match.group(2)
    return int(float(match.group(1)) * (_UNITS[unit.lower()] if unit else 1))


def settings_table(lab_path: Path, name: str) -> dict[str, Any]:
    """The ``[name]`` table of ``<lab_path>/rsilab.toml``; empty when the file or table is missing.

    Other parts of rsilab keep their settings in their own table of the same file (the LLM
    clients use ``[llm]``) and read it here, so the file is parsed in one place.

    Raises:
        UserError: the file cannot be read or does not parse, or ``name`` is not a table.
    """
    path = Path(lab_path) / SETTINGS_FILE
    if not path.is_file():
        return {}
    try:
        table = tomllib.loads(path.read_text("utf-8")).get(name, {})
    except (tomllib.TOMLDecodeError, OSError) as exc:
        raise UserError(f"{path}: {exc}", "fix the TOML syntax of the file") from exc
    if not isinstance(table, dict):
        raise UserError(f"{path}: {name} is not a table", f"write it as a [{name}] table")
    return table


def lab_settings(lab_path: Path) -> LabSettings:
    """The ``[lab]`` table of ``<lab_path>/rsilab.toml`` (defaults when there is none).

    Raises:
        UserError: the file does not parse, or a value has the wrong shape.
    """
    path = Path(lab_path) / SETTINGS_FILE
    table = settings_table(lab_path, "lab")
    try:
        limit = table.get("size_limit")
        keep_top = table.get("gc_keep_top", DEFAULT_KEEP_TOP)
        if not isinstance(keep_top, int) or isinstance(keep_top, bool) or keep_top < 0:
            raise ValueError(f"gc_keep_top must be a whole number >= 0, not {keep_top!r}")
        return LabSettings(None if limit is None else parse_size(limit), keep_top)
    except ValueError as exc:
        raise UserError(
            f"{path}: {exc}",
            'the [lab] table takes size_limit = "2G" and gc_keep_top = 3',
        ) from exc
