"""``rsilab agent --bind-ro DIR``: the agent's own installation, shown read-only in the sandbox.

A coding agent's program (Claude Code's native binary, a Node.js tree, a Python venv) lives
outside its workspace: copied into the workspace, it would be snapshotted into every candidate
and the agent could rewrite it. :func:`check_binds` accepts a folder to show at its own path,
read-only, only where that cannot widen what the agent sees of the lab: never the lab, the
ledger keys or the workspace, nothing inside them and nothing holding them, and none of the
places the sandbox builds itself (``/``, ``/tmp``, ``/proc``, ``/usr``, ...). A folder that
holds the task's data files, or lies in their folder, is refused before these checks
(:func:`rsilab.mcp.task_data.check_clear`); the sandbox masks those files besides.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from rsilab.errors import UserError

MAX_BINDS = 8
"""Folders one run may bind; an installation is one or two."""

SANDBOX_PLACES = (
    "/bin", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/rsilab", "/run",
    "/sbin", "/sys", "/usr", "/workspace",
)  # fmt: skip
"""Folders the sandbox makes or shows itself: a bind there would cover (or widen) them."""


def check_binds(
    dirs: Sequence[Path], private: Sequence[tuple[str, Path]], inside: Sequence[PurePosixPath] = ()
) -> tuple[Path, ...]:
    """The folders of ``--bind-ro``, resolved (links followed), in order.

    ``private`` names each place no bind may hold or lie in, with what to call it (the lab,
    the ledger keys, the workspace); ``inside`` adds places of the sandbox that are not
    :data:`SANDBOX_PLACES`.

    Raises:
        UserError: one line naming the folder and why it cannot be bound, and what to do.
    """
    if len(dirs) > MAX_BINDS:
        raise UserError(
            f"--bind-ro was given {len(dirs)} times; at most {MAX_BINDS}",
            "install the agent under one folder and bind that",
        )
    found: list[Path] = []
    for given in dirs:
        folder = _folder(Path(given))
        _check_private(given, folder, private)
        _check_sandbox(given, folder, inside)
        if folder not in found:
            found.append(folder)
    return tuple(found)


def _folder(given: Path) -> Path:
    if not given.is_absolute():
        given = Path.cwd() / given
    folder = given.resolve()
    if not folder.is_dir():
        raise UserError(
            f"--bind-ro {given}: not a folder",
            "give the folder the agent is installed in, e.g. --bind-ro /opt/agents/claude-code",
        )
    return folder


def _check_private(given: Path, folder: Path, private: Sequence[tuple[str, Path]]) -> None:
    for name, place in private:
        place = place.resolve()
        if folder == place or folder.is_relative_to(place):
            raise UserError(
                f"--bind-ro {given}: it lies in {name} {place}, which the agent must not see",
                "install the agent outside the lab and its workspace "
                "(e.g. under /opt/agents) and bind that folder",
            )
        if place.is_relative_to(folder):
            raise UserError(
                f"--bind-ro {given}: it holds {name} {place}, which the agent must not see",
                "bind only the agent's own installation folder, not one above the lab "
                "or the workspace",
            )


def _check_sandbox(given: Path, folder: Path, inside: Sequence[PurePosixPath]) -> None:
    target = PurePosixPath(folder)
    places = [PurePosixPath(p) for p in SANDBOX_PLACES] + list(inside)
    covered = [p for p in places if target == p or target.is_relative_to(p)]
    if target == PurePosixPath("/") or target == PurePosixPath("/tmp") or covered:
        where = covered[0] if covered else target
        raise UserError(
            f"--bind-ro {given}: {where} is a place the sandbox builds itself "
            "(programs under /usr are visible already)",
            "install the agent in a folder of its own, e.g. "
            "`npm install --prefix /opt/agents/claude-code @anthropic-ai/claude-code`",
        )
