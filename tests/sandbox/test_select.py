"""Choosing the sandbox: RSILAB_SANDBOX, bwrap when usable, a logged fallback otherwise."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rsilab.sandbox import BwrapSandbox, ProcessSandbox, SandboxUnavailable, default_sandbox
from rsilab.sandbox.select import choose_sandbox
from tests.sandbox.helpers import bwrap_problem


def test_forcing_the_process_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "process")
    assert isinstance(default_sandbox(), ProcessSandbox)


def test_an_unknown_name_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "docker")
    with pytest.raises(SandboxUnavailable, match="names no sandbox") as caught:
        default_sandbox()
    assert "bwrap, process" in caught.value.hint


def test_forced_bwrap_without_a_runtime_fails_with_a_hint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RSILAB_SANDBOX", "bwrap")
    monkeypatch.setenv("RSILAB_RUNTIME", str(tmp_path / "missing"))
    with pytest.raises(SandboxUnavailable, match="RSILAB_SANDBOX=bwrap") as caught:
        default_sandbox()
    assert caught.value.hint


def test_no_silent_fallback_without_an_opt_in(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Where bubblewrap cannot run, jobs are refused, naming the opt-in: never plain
    processes behind a person's back."""
    monkeypatch.delenv("RSILAB_SANDBOX", raising=False)
    monkeypatch.setenv("RSILAB_RUNTIME", str(tmp_path / "missing"))
    with pytest.raises(SandboxUnavailable) as refused:
        default_sandbox()
    assert "runtime environment is not installed" in refused.value.message
    assert "--unsandboxed" in refused.value.hint and "RSILAB_SANDBOX=process" in refused.value.hint


def test_an_opted_in_fallback_logs_a_warning(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("RSILAB_SANDBOX", raising=False)
    monkeypatch.setenv("RSILAB_RUNTIME", str(tmp_path / "missing"))
    with caplog.at_level(logging.WARNING, logger="rsilab.sandbox.select"):
        sandbox = default_sandbox(allow_unsandboxed=True)
    assert isinstance(sandbox, ProcessSandbox)
    assert "NOT a security boundary" in caplog.text
    assert choose_sandbox(allow_unsandboxed=True).bwrap_problem is not None


@pytest.mark.skipif(bwrap_problem() is not None, reason="bubblewrap is unusable here")
def test_bwrap_is_the_default_where_it_works(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RSILAB_SANDBOX", raising=False)
    sandbox = default_sandbox()
    assert isinstance(sandbox, BwrapSandbox) and sandbox.is_security_boundary
    sandbox.close()
