"""Opening a PostgreSQL lab: the engine, the server's durability setting, the lab's metadata
and its migrations."""

from __future__ import annotations

import os
import secrets
from typing import Any

import psycopg
from sqlalchemy import Connection, Engine, create_engine, event, text

from rsilab.errors import LabError
from rsilab.records import SCHEMA_VERSION, utc_now
from rsilab.store._pg_schema import migrate
from rsilab.store._pg_url import PgLocation

SETUP_LOCK = 0x72_73_69_6C_61_62  # "rsilab": creating or upgrading a lab is one at a time
CONNECT_TIMEOUT_S = 10


READ_ONLY_OPTION = "-c default_transaction_read_only=on"
"""The server-side setting of a read-only open: every transaction of the connection is read
only, so a write anywhere in rsilab fails at the server, not only where rsilab refuses it."""


def make_engine(location: PgLocation, read_only: bool = False) -> Engine:
    """An engine whose pooled connections are checked before use, so a server restart costs
    one reconnect instead of an error; with ``read_only`` the server refuses every write on
    its connections (:data:`READ_ONLY_OPTION`)."""
    args: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT_S, "application_name": "rsilab"}
    if read_only:
        args["options"] = READ_ONLY_OPTION
    return create_engine(
        location.url,
        pool_pre_ping=True,
        pool_size=8,
        max_overflow=16,
        isolation_level="READ COMMITTED",
        connect_args=args,
    )


def stay_in_lab(engine: Engine, lab_id: str, where: str) -> None:
    """Make every new connection of ``engine`` check that its database still holds lab
    ``lab_id``, and raise LabError (no statement runs on it) when it does not.

    A pool reconnects by name: a lab database dropped and made again (another lab created
    there, a restore of another lab's dump) would otherwise take the writes of a process
    that opened the first. Connections are checked when made, not at each commit: a pooled
    one was checked when it was made, and a dropped database ends every connection to it.
    """

    def check(dbapi_connection: Any, _record: Any) -> None:
        try:
            with dbapi_connection.cursor() as cursor:
                cursor.execute("SELECT value FROM meta WHERE key = 'lab_id'")
                row = cursor.fetchone()
                found = None if row is None else str(row[0])
        except psycopg.errors.UndefinedTable:  # no meta table: not a lab at all
            found = None
        finally:
            dbapi_connection.rollback()
        if found != lab_id:
            now = f"lab {found}" if found else "no lab"
            raise LabError(
                f"the database of lab {lab_id} ({where}) now holds {now}: it was dropped "
                "and made again while this process had it open; nothing more was written",
                "restore the lab's database from a backup (rsilab backup), or open the lab "
                "that is there now in a new command",
            )

    event.listen(engine, "connect", check)


THROWAWAY_ENV = "RSILAB_PG_THROWAWAY"
"""Set to 1 to accept a server run with ``fsync=off`` (a test's throwaway server)."""


def check_durable(conn: Connection, where: str) -> None:
    """Refuse a server that may lose commits it has acknowledged.

    With ``synchronous_commit=off`` a commit returns before its WAL reaches the disk, so a
    crash can drop acknowledged events: the ledger's tail would vanish after rsilab reported
    it written. With ``fsync=off`` or ``full_page_writes=off`` the server does not make its
    WAL durable at all, or can leave torn pages after a crash. Raises LabError.
    """
    # off: a crash can lose or tear the WAL itself. A throwaway server (a test's) may say so
    # explicitly; nothing accepts it quietly.
    throwaway = os.environ.get(THROWAWAY_ENV) == "1"
    for name in ("fsync", "full_page_writes"):
        if throwaway:
            break
        if str(conn.execute(text(f"SHOW {name}")).scalar_one()).lower() == "off":
            raise LabError(
                f"the PostgreSQL server of the lab {where} runs with {name}=off, which can "
                "lose or corrupt acknowledged ledger events in a crash; refused",
                f"start the server with {name} = on (postgresql.conf); for a throwaway server "
                f"only, {THROWAWAY_ENV}=1 accepts it",
            )
    setting = str(conn.execute(text("SHOW synchronous_commit")).scalar_one())
    if setting.lower() == "off":
        raise LabError(
            f"the PostgreSQL server of the lab {where} runs with synchronous_commit=off, "
            "which can lose acknowledged ledger events in a crash; refused",
            "set synchronous_commit = on for the lab's database "
            "(ALTER DATABASE ... SET synchronous_commit = on) or on the server",
        )


def prepare(
    conn: Connection, where: str, create: bool, lab_id: str | None, read_only: bool = False
) -> str:
    """Create (``create``) or check and upgrade the lab in the database; its lab id.

    Runs inside the caller's transaction, under a lock that makes two processes creating or
    upgrading one lab take turns. ``lab_id`` (with ``create``) keeps the id of a lab copied
    from elsewhere. With ``read_only`` a lab whose schema is older is refused, not upgraded.
    Raises LabError.
    """
    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": SETUP_LOCK})
    has_meta = conn.execute(text("SELECT to_regclass('meta') IS NOT NULL")).scalar_one()
    if create:
        if has_meta:
            raise LabError(
                f"a lab already exists in the database {where}",
                "use it, or create an empty database for the new lab",
            )
        migrate(conn, 0, SCHEMA_VERSION)
        new_id = lab_id or f"lab-{secrets.token_hex(8)}"
        for key, value in (("app", "rsilab"), ("lab_id", new_id), ("created_at", utc_now())):
            conn.execute(text("INSERT INTO meta VALUES (:k, :v)"), {"k": key, "v": value})
        return new_id
    if not has_meta:
        raise LabError(
            f"the database {where} holds no rsilab lab",
            "create one with `rsilab init --lab URL`, or check the database name",
        )
    meta = {str(k): str(v) for k, v in conn.execute(text("SELECT key, value FROM meta"))}
    if meta.get("app") != "rsilab" or "lab_id" not in meta:
        raise LabError(
            f"the database {where} is not an rsilab lab (foreign metadata)", "check --lab"
        )
    version = int(meta.get("schema_version", "0"))
    if version > SCHEMA_VERSION:
        raise LabError(
            f"the lab {where} has schema version {version}, newer than this rsilab understands "
            f"({SCHEMA_VERSION}); it was left untouched",
            "upgrade rsilab to open it",
        )
    if version < SCHEMA_VERSION and read_only:
        raise LabError(
            f"the lab {where} has schema version {version}, older than this rsilab's "
            f"({SCHEMA_VERSION}), and upgrading it would write to it; it was left as it was",
            "run a command that changes the lab once (opening it for writing upgrades it), "
            "or use the rsilab that wrote it",
        )
    if version < SCHEMA_VERSION:
        migrate(conn, version, SCHEMA_VERSION)
    return meta["lab_id"]
