"""Choosing the executor: ``--executor`` and the ``[executor]`` table of ``rsilab.toml``.

No Ray cluster here: every case is refused (or resolved) before one would be joined.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rsilab.errors import UserError
from rsilab.executors import ExecutorChoice, executor_from_table, parse_executor
from rsilab.sandbox import current_runtime
from rsilab.store import Lab
from tests.cli.helpers import explain, rsilab


@pytest.mark.parametrize(
    ("text", "kind", "address"),
    [
        ("local", "local", None),
        ("ray", "ray", None),
        ("ray=10.0.0.5:6379", "ray", "10.0.0.5:6379"),
        ("ray=head.example:1", "ray", "head.example:1"),
    ],
)
def test_executor_texts(text: str, kind: str, address: str | None) -> None:
    assert parse_executor(text) == ExecutorChoice(kind, address)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text", ["", "remote", "local=x:1", "ray=", "ray=host", "ray=h:0", "ray=h:x"]
)
def test_bad_executor_texts_are_refused(text: str) -> None:
    with pytest.raises(UserError, match="names no executor"):
        parse_executor(text)


def test_the_executor_table() -> None:
    assert executor_from_table({}, "f") is None
    assert executor_from_table({"kind": "local"}, "f") == ExecutorChoice()
    assert executor_from_table({"kind": "ray"}, "f") == ExecutorChoice("ray")
    made = executor_from_table({"kind": "ray", "address": "10.0.0.5:6379"}, "f")
    assert made == ExecutorChoice("ray", "10.0.0.5:6379")
    for bad in ({"kind": "k8s"}, {"kind": "ray", "adress": "h:1"}, {"address": "h:1"}):
        with pytest.raises(UserError, match=r"^f: \[executor\]"):
            executor_from_table(bad, "f")


def test_run_refuses_a_bad_executor_in_one_line(tmp_path: Path) -> None:
    result = rsilab("run", "synthetic", "--executor", "k8s", "--lab", tmp_path / "lab")
    assert result.exit_code == 2, explain(result)
    assert "--executor 'k8s' names no executor" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "lab").exists()  # refused before the lab was made


def test_run_refuses_a_cluster_it_holds_no_token_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_MODE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RSILAB_RUNTIME", str(current_runtime().path))  # kept where it is
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.ray/auth_token
    with Lab.init(tmp_path / "lab") as lab:
        (lab.path / "rsilab.toml").write_text('[executor]\nkind = "ray"\naddress = "127.0.0.1:9"\n')
    result = rsilab("run", "synthetic", "--lab", tmp_path / "lab", "--budget", "experiments=1")
    assert result.exit_code == 2, explain(result)
    assert "no Ray authentication token for the cluster at 127.0.0.1:9" in result.stderr
    assert "Traceback" not in result.stderr
