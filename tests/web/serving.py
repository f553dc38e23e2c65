"""Serving the dashboard from tests: a real uvicorn server on a free loopback port."""

from __future__ import annotations

import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from rsilab.web.app import create_app


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass(frozen=True)
class Reply:
    """An HTTP answer: status and body text."""

    status: int
    text: str


@dataclass(frozen=True)
class Served:
    """A dashboard being served."""

    base: str

    def get(self, path: str) -> Reply:
        """GET ``path``; 4xx and 5xx answers are returned, not raised."""
        return self.send(urllib.request.Request(self.base + path))

    def post(self, path: str, data: bytes) -> Reply:
        """POST a form to ``path`` (redirects are not followed)."""
        request = urllib.request.Request(
            self.base + path,
            data=data,
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        return self.send(request, follow=False)

    def send(self, request: urllib.request.Request, *, follow: bool = True) -> Reply:
        opener = urllib.request.build_opener(*(() if follow else (_NoRedirect(),)))
        try:
            with opener.open(request, timeout=30) as answer:
                return Reply(answer.status, answer.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            return Reply(exc.code, exc.read().decode("utf-8"))


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


@contextmanager
def serve(lab: Path) -> Iterator[Served]:
    """The dashboard of ``lab`` on a free 127.0.0.1 port, until the block ends."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(lab), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the dashboard server did not start")
        time.sleep(0.02)
    try:
        yield Served(f"http://127.0.0.1:{port}")
    finally:
        server.should_exit = True
        thread.join(timeout=30)
