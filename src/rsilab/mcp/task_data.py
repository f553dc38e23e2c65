"""Where a campaign task's data lies on the host, and the folders ``rsilab agent`` refuses
because of it.

A task's data files are its split files (``FileSplits``), its pool file (``PoolSplits``) and
its declared ``data_sources``: together they hold every tier, the private ones included. A
folder shown to an agent (its workspace, a ``--bind-ro`` folder) must not hold one of them,
and must not lie inside the folder that holds one (a task's own folder, a download folder):
:func:`data_places` names those folders, :func:`check_clear` refuses. The sandbox also masks
the files themselves (:func:`data_files` feeds its hidden paths), but a refusal comes first,
so the user's folder is never handed to the sandbox user either.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rsilab.errors import UserError
from rsilab.tasks import data_files, data_places

__all__ = ["check_clear", "data_files", "data_places"]


def check_clear(folder: Path, places: Sequence[Path], what: str, hint: str) -> None:
    """Refuse ``folder`` (shown to the agent as ``what``) when it is, holds or lies inside
    one of ``places`` (see :func:`data_places`).

    Raises:
        UserError: one line naming the folder and the data folder, and ``hint``.
    """
    folder = folder.resolve()
    for place in places:
        if folder == place or folder.is_relative_to(place) or place.is_relative_to(folder):
            relation = (
                "is" if folder == place else "holds" if place.is_relative_to(folder) else "lies in"
            )
            raise UserError(
                f"{what} {folder} {relation} {place}, which holds the task's data files, "
                "private tiers included: the agent would see them",
                hint,
            )
