"""A throwaway PostgreSQL server for the store tests: its own data folder, a unix socket only.

``initdb`` refuses root, so as root the server runs as ``nobody`` (the folder is made in the
system's temporary folder and handed to that user). Where PostgreSQL is missing the tests that
need it skip, unless the Makefile could have installed it (root and apt-get, as
``make postgres-deps`` does): then they fail, so a green run always includes PostgreSQL.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from rsilab.store.postgres import PostgresStore

BIN_GLOB = "/usr/lib/postgresql/*/bin"
SERVER_USER = "nobody"
SUPERUSER = "rsilab"
PORT = 5432  # only names the socket file: the server listens on no TCP port


def find_bin() -> Path | None:
    """The newest PostgreSQL binaries folder with initdb, pg_ctl and postgres, or None."""

    def version(folder: str) -> int:
        name = Path(folder).parent.name
        return int(name) if name.isdigit() else 0

    found = sorted(glob.glob(BIN_GLOB), key=version, reverse=True)
    for folder in map(Path, found):
        if all((folder / name).is_file() for name in ("initdb", "pg_ctl", "postgres")):
            return folder
    return None


def installable() -> bool:
    """Whether ``make postgres-deps`` could have installed PostgreSQL here (root + apt-get)."""
    return os.geteuid() == 0 and shutil.which("apt-get") is not None


def missing(reason: str) -> None:
    """Skip the test for ``reason``, or fail it where the Makefile could have fixed that."""
    if installable():
        pytest.fail(
            f"{reason}; `make postgres-deps` installs it here (root + apt-get): the PostgreSQL "
            "store tests must run",
            pytrace=False,
        )
    pytest.skip(f"{reason} (install the postgresql package to run these tests)")


@dataclass
class PgServer:
    """A running server; :meth:`database` makes an empty database for one test."""

    bin: Path
    folder: Path
    user: str | None
    """The system user the server runs as (None: this process's user)."""
    durable: bool = False
    """fsync on (as a production server runs; the benchmark measures that way)."""

    @property
    def data(self) -> Path:
        return self.folder / "data"

    def _run(self, *argv: str, timeout: float = 120) -> None:
        done = subprocess.run(
            [str(a) for a in argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            user=self.user,
            cwd=self.folder,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed ({done.returncode}): {done.stdout}{done.stderr}")

    def url(self, database: str = "postgres") -> str:
        """The SQLAlchemy/libpq URL of ``database`` (unix socket, trusted local auth)."""
        return f"postgresql://{SUPERUSER}@/{database}?host={self.folder}&port={PORT}"

    def lab_url(self, database: str, artifacts: Path) -> str:
        """The ``--lab`` URL of a lab in ``database`` with its folder ``artifacts``."""
        return f"{self.url(database)}&artifacts={artifacts}"

    def admin(self, sql: str) -> None:
        """Run one statement as the superuser, outside any transaction."""
        import psycopg

        with psycopg.connect(
            host=str(self.folder), port=PORT, user=SUPERUSER, dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(sql.encode())

    def database(self) -> str:
        """A new empty database; its name."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        self.admin(f"CREATE DATABASE {name}")
        return name

    def start(self) -> None:
        pg_ctl = self.bin / "pg_ctl"
        # fsync=off spares the shared disk (each test makes a database; a restart's shutdown
        # checkpoint would flush them all): it only matters when the machine itself crashes,
        # which no test does. synchronous_commit, the setting the store checks, stays on.
        options = (
            f"-k {self.folder} -c listen_addresses='' -p {PORT} -c max_connections=200 "
            f"-c fsync={'on' if self.durable else 'off'}"
        )
        self._run(pg_ctl, "-D", self.data, "-l", self.folder / "log", "-w", "-o", options, "start")

    def stop(self, mode: str = "fast") -> None:
        self._run(self.bin / "pg_ctl", "-D", self.data, "-m", mode, "-w", "stop")

    def restart(self) -> None:
        """Stop (ending every connection) and start again, as an operator's restart does."""
        self.stop()
        self.start()


def start_server(base: Path, *, durable: bool = False) -> PgServer:
    """Initialise and start a server in a new folder (as ``nobody`` when root); ``durable``
    keeps fsync on (see :meth:`PgServer.start`)."""
    bin_folder = find_bin()
    if bin_folder is None:
        missing(f"PostgreSQL is not installed (no initdb under {BIN_GLOB})")
    assert bin_folder is not None
    user = SERVER_USER if os.geteuid() == 0 else None
    # The socket path must stay short (about 100 bytes), and the server's user must reach it.
    folder = Path(tempfile.mkdtemp(prefix="rsilab-pg-", dir="/tmp" if user else base))
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(folder, entry.pw_uid, entry.pw_gid)
    server = PgServer(bin_folder, folder, user, durable)
    server._run(
        bin_folder / "initdb", "-D", server.data, "-U", SUPERUSER, "--auth=trust",
        "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync",
    )  # fmt: skip
    server.start()
    return server


def stop_server(server: PgServer) -> None:
    """Stop the server and remove its folder."""
    try:
        server.stop("immediate")
    finally:
        shutil.rmtree(server.folder, ignore_errors=True)


def new_pg_store(request: pytest.FixtureRequest) -> PostgresStore:
    """A new PostgreSQL lab's store (a fresh database), for backend-parametrised fixtures;
    the session's server starts on first use."""
    url: str = request.getfixturevalue("pg_lab_url")
    return PostgresStore.open(url, create=True)
