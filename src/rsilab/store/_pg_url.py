"""A PostgreSQL lab's address: ``postgresql://USER@HOST[:PORT]/DB?artifacts=FOLDER``.

The database holds the records, the ledger and its checkpoints; ``artifacts`` names the lab's
folder on this machine (blobs, workspaces, the task secret), which the database cannot hold.
Other query parameters (``host=/socket/dir``, ``sslmode=...``) go to the driver (psycopg 3).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rsilab.errors import LabError

if TYPE_CHECKING:  # SQLAlchemy loads only when a PostgreSQL lab is used: it is slow to import
    from sqlalchemy.engine import URL

_SCHEME = re.compile(r"^postgres(?:ql)?(?:\+psycopg)?:", re.IGNORECASE)
_COLLAPSED = re.compile(r"^(postgres(?:ql)?(?:\+psycopg)?):/(?!/)", re.IGNORECASE)
ARTIFACTS = "artifacts"
"""The query parameter naming the lab's artifact folder."""


@dataclass(frozen=True)
class PgLocation:
    """Where a PostgreSQL lab lives: the database (without ``artifacts``) and the folder."""

    url: URL
    """The SQLAlchemy URL of the database, driver psycopg 3."""
    folder: Path
    """The lab's folder on this machine: artifacts, workspaces, the task secret."""

    @property
    def shown(self) -> str:
        """The database URL with its password hidden, for messages."""
        return self.url.render_as_string(hide_password=True)


def is_pg_url(spec: str | Path) -> bool:
    """Whether ``spec`` (a ``--lab`` value) names a PostgreSQL lab rather than a folder."""
    return bool(_SCHEME.match(str(spec)))


def parse_pg_url(spec: str | Path) -> PgLocation:
    """The location a ``--lab`` URL names.

    A :class:`~pathlib.Path` made from a URL has lost one slash of ``//`` (``Path`` collapses
    them); it is put back, so a URL must name a user or a host (``postgresql://me@/db``).
    Raises LabError: not parseable, no database name, or no ``artifacts`` folder.
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    raw = _COLLAPSED.sub(r"\1://", str(spec)) if isinstance(spec, Path) else str(spec)
    try:
        url = make_url(raw)
    except ArgumentError as exc:
        raise LabError(
            f"--lab {raw!r} is not a PostgreSQL URL ({exc})",
            "write it as postgresql://USER@HOST/DB?artifacts=/a/folder",
        ) from exc
    folder = url.query.get(ARTIFACTS)
    if not folder or not isinstance(folder, str):
        raise LabError(
            f"the PostgreSQL lab {url.render_as_string(hide_password=True)} names no artifact "
            "folder (exactly one 'artifacts=' query parameter)",
            "add ?artifacts=/a/folder (the lab's blobs, workspaces and secret live there)",
        )
    if not url.database:
        raise LabError(
            f"the PostgreSQL lab URL {raw!r} names no database",
            "write it as postgresql://USER@HOST/DB?artifacts=/a/folder",
        )
    db = url.difference_update_query([ARTIFACTS]).set(drivername="postgresql+psycopg")
    return PgLocation(db, Path(folder))


def lab_url(db: URL, folder: Path) -> str:
    """The ``--lab`` text for a database and an artifact folder (password included)."""
    plain = db.set(drivername="postgresql")
    return plain.update_query_dict({ARTIFACTS: str(folder)}).render_as_string(hide_password=False)
