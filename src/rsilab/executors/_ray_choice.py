"""Which executor runs a lab's jobs: ``--executor local|ray[=ADDRESS]`` or ``[executor]``.

```toml
[executor]          # in <lab>/rsilab.toml
kind = "ray"        # or "local" (the default)
address = "10.0.0.5:6379"   # the cluster's GCS; leave it out to start a cluster here
```

The command line's ``--executor`` wins over the file; neither given means ``local``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from rsilab.errors import UserError

_HINT = "write --executor local, --executor ray, or --executor ray=HOST:PORT"


@dataclass(frozen=True)
class ExecutorChoice:
    """An executor to make: ``local`` (slots on this machine) or ``ray`` (a Ray cluster at
    ``address``, or one started here when None)."""

    kind: Literal["local", "ray"] = "local"
    address: str | None = None

    def __str__(self) -> str:
        return f"ray={self.address}" if self.address else self.kind


def parse_executor(text: str) -> ExecutorChoice:
    """``local``, ``ray`` or ``ray=HOST:PORT``.

    Raises:
        UserError: anything else (one line, and what to write).
    """
    kind, sep, address = text.strip().partition("=")
    if kind == "local" and not sep:
        return ExecutorChoice()
    if kind == "ray" and not sep:
        return ExecutorChoice("ray")
    if kind == "ray" and _is_address(address):
        return ExecutorChoice("ray", address)
    raise UserError(f"--executor {text!r} names no executor", _HINT)


def executor_from_table(table: dict[str, Any], where: str) -> ExecutorChoice | None:
    """The ``[executor]`` table of ``rsilab.toml`` (read by the caller); None when empty.

    Raises:
        UserError: an unknown key, a kind other than local or ray, or a bad address.
    """
    if not table:
        return None
    unknown = sorted(set(table) - {"kind", "address"})
    kind, address = table.get("kind", "local"), table.get("address")
    if unknown or kind not in ("local", "ray"):
        raise UserError(
            f'{where}: [executor] takes kind = "local" or "ray" and address; got '
            f"{', '.join(unknown) or f'kind = {kind!r}'}",
            'e.g. [executor] kind = "ray" address = "10.0.0.5:6379"',
        )
    if address is None:
        return ExecutorChoice(kind)
    if kind != "ray" or not isinstance(address, str) or not _is_address(address):
        raise UserError(
            f"{where}: [executor] address {address!r} is not HOST:PORT of a Ray cluster",
            'e.g. address = "10.0.0.5:6379", with kind = "ray"',
        )
    return ExecutorChoice("ray", address)


def _is_address(text: str) -> bool:
    host, sep, port = text.rpartition(":")
    return bool(host) and bool(sep) and port.isdigit() and 0 < int(port) < 65536
