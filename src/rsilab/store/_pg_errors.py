"""What a PostgreSQL failure means for a person: an unreachable server, a full disk, a
read-only or refused database, a row that does not parse."""

from __future__ import annotations

from pydantic import ValidationError
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from rsilab.errors import LabDamaged, LabError, WriteRefused

HINT = "run `rsilab verify --lab URL` to list what is damaged, then restore the database"

_DISK_FULL, _READ_ONLY, _NO_PRIVILEGE = "53100", "25006", "42501"


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def is_disconnect(exc: SQLAlchemyError) -> bool:
    """Whether ``exc`` means the connection to the server was lost (or never made)."""
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    return is_lost_server(getattr(exc, "orig", None))


def is_lost_server(error: BaseException | None) -> bool:
    """Whether the driver's ``error`` means no server answered or it went away (not a server
    that answered with a refusal, such as a wrong password)."""
    import psycopg  # the driver: imported here so that SQLite-only code never loads it

    return isinstance(error, psycopg.OperationalError) and error.sqlstate in (
        None,
        "57P01",  # admin_shutdown: the server is stopping or restarting
        "57P02",
        "57P03",  # cannot_connect_now: the server is starting up
        "08000",
        "08003",
        "08006",
    )


def explain(exc: SQLAlchemyError, where: str, opened_read_only: bool = False) -> LabError:
    """The LabError a person reads for ``exc`` on the lab database ``where`` (a URL shown
    without its password); ``opened_read_only``: the store was opened for reading only, so a
    refused write is rsilab's own setting, not a standby server."""
    state = getattr(getattr(exc, "orig", None), "sqlstate", None)
    if state == _READ_ONLY and opened_read_only:
        return LabError(
            f"the lab {where} was opened read-only (a command that only reads); nothing was "
            "written",
            "open it for writing (a command that changes the lab)",
        )
    if state == _DISK_FULL:
        return WriteRefused(
            f"cannot write to the lab database {where}: the server's disk is full; nothing "
            "from this change was recorded",
            remedy="free space on the PostgreSQL server",
        )
    if state == _READ_ONLY:
        return LabError(
            f"cannot write to the lab database {where}: the server or database is read-only",
            "point --lab at the primary server, not a standby",
        )
    if state == _NO_PRIVILEGE:
        return LabError(
            f"the lab database {where} refused this user: {_first_line(exc)}",
            "grant the user rights on the lab's tables, or use the user that created the lab",
        )
    if is_disconnect(exc):
        return LabError(
            f"cannot reach the PostgreSQL server of the lab {where}: {_first_line(exc)}",
            "start the server, or check the URL's host, port, user and database",
        )
    return LabError(f"the lab database {where} failed: {_first_line(exc)}", "see `rsilab doctor`")


def unparsed_row(where: str, table: str, row: str, exc: Exception) -> LabDamaged:
    """The error for a stored row of ``table`` that does not parse (``row`` names it)."""
    problem = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, ValidationError) and exc.errors():
        first = exc.errors()[0]
        problem = ".".join(str(p) for p in first.get("loc", ())) + f": {first.get('msg', '')}"
    return LabDamaged(
        f"the lab database {where} holds a row that does not parse: table {table}, row {row}: "
        f"{problem}",
        HINT,
        table=table,
        row=row,
    )
