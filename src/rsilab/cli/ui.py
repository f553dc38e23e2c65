"""``rsilab ui``: serve the lab dashboard on 127.0.0.1."""

from __future__ import annotations

import errno
import socket
from typing import Annotated

import typer

from rsilab.cli._common import LabOption
from rsilab.errors import UserError

HOST = "127.0.0.1"
"""The dashboard listens on the loopback interface only: it shows the whole lab."""


def ui(
    port: Annotated[
        int, typer.Option("--port", min=1, max=65535, help="Port on 127.0.0.1 to serve on.")
    ] = 8765,
    lab: LabOption = None,
) -> None:
    """Serve the lab dashboard at http://127.0.0.1:PORT until Ctrl-C: campaigns, the research
    DAG, best-so-far curves, experiments, comparisons, the lineage's decisions, flags,
    resources, findings and skills. Pages follow a running campaign as it goes.

    It only reads the lab, except guidance typed into a campaign's page, which is recorded
    as `rsilab guide` records it. Works offline: nothing is loaded from the network.
    """
    import uvicorn

    from rsilab.web.app import create_app

    _check_port_free(port)
    app = create_app(lab)
    typer.echo(f"rsilab dashboard: http://{HOST}:{port}/  (Ctrl-C stops it)")
    uvicorn.run(app, host=HOST, port=port, log_level="warning")


def _check_port_free(port: int) -> None:
    """Refuse a port another program holds, with a hint, before the lab is opened."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((HOST, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise UserError(
                    f"port {port} on {HOST} is already in use",
                    f"pick another with --port (e.g. --port {port + 1}), or stop what holds it",
                ) from None
            raise UserError(f"cannot listen on {HOST}:{port}: {exc.strerror or exc}") from None


def register(app: typer.Typer) -> None:
    """Add ``ui`` to ``app``."""
    app.command("ui")(ui)
