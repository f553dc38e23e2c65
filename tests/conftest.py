"""Suite-wide isolation: every test gets its own key folder and no inherited lab; no
workspace filesystem outlives the session; the suite's processes start as from a terminal."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Signals a background launcher made ignored (a script's `make test &`, nohup) get their
    defaults back in this process, so what it starts does not inherit them: a test that sends
    a child Ctrl-C tests what a person's Ctrl-C does. The tests of what happens when signals
    are ignored set that up themselves."""
    defaults = {
        signal.SIGINT: signal.default_int_handler,
        signal.SIGHUP: signal.SIG_DFL,
        signal.SIGQUIT: signal.SIG_DFL,
    }
    for signum, handler in defaults.items():
        if signal.getsignal(signum) is signal.SIG_IGN:
            signal.signal(signum, handler)


@pytest.fixture(autouse=True)
def isolated_environment(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """Keys and watermarks go to a fresh folder; RSILAB_* settings from the caller are dropped."""
    key_dir = tmp_path_factory.mktemp("keys")
    monkeypatch.setenv("RSILAB_KEY_DIR", str(key_dir))
    for name in ("RSILAB_LAB", "RSILAB_LEDGER_KEY"):
        monkeypatch.delenv(name, raising=False)
    # the suite's PostgreSQL servers run with fsync=off (tests/store/pg_server.py): said so
    monkeypatch.setenv("RSILAB_PG_THROWAWAY", "1")
    yield key_dir


@pytest.fixture(scope="session", autouse=True)
def no_mounts_left(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Workspace images a test left mounted (a killed process's, by design) are unmounted,
    so the temporary folders can be deleted."""
    yield
    from rsilab.sandbox._workspaces import unmount_all_under

    unmount_all_under(tmp_path_factory.getbasetemp())
