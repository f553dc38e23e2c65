"""``rsilab token new|list|revoke`` and the options of ``rsilab mcp --http``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rsilab.mcp import tokens
from rsilab.records import Role
from rsilab.store import Lab
from tests.cli.helpers import explain, rsilab


def _new(lab: Path, campaign_id: str, *extra: str) -> str:
    result = rsilab(
        "token", "new", "--campaign", campaign_id, "--role", "worker", "--actor", "w1",
        "--lab", lab, *extra,
    )  # fmt: skip
    assert result.exit_code == 0, explain(result)
    return result.stdout.strip()


def test_new_prints_the_token_alone_and_it_grants_the_worker(lab: Path, campaign_id: str) -> None:
    text = _new(lab, campaign_id, "--expires", "2h")
    assert text.startswith("rsl_") and len(text) == 47 and "\n" not in text
    with Lab.open(lab) as opened:
        grant = tokens.check(opened.store, text, campaign_id)
    assert isinstance(grant, tokens.Grant)
    assert (grant.role, grant.actor) == (Role.WORKER, "w1")


def test_list_then_revoke(lab: Path, campaign_id: str) -> None:
    _new(lab, campaign_id)
    listed = rsilab("token", "list", "--json", "--lab", lab)
    assert listed.exit_code == 0, explain(listed)
    [row] = json.loads(listed.stdout)
    assert (row["role"], row["actor"], row["state"], row["campaign"]) == (
        "worker", "w1", "active", campaign_id,
    )  # fmt: skip
    assert "token" not in row  # the text is shown once, at issue, and kept nowhere
    revoked = rsilab("token", "revoke", row["id"], "--lab", lab)
    assert revoked.exit_code == 0, explain(revoked)
    assert row["id"] in revoked.stdout
    table = rsilab("token", "list", "--lab", lab)
    assert row["id"] in table.stdout and "revoked" in table.stdout
    again = rsilab("token", "revoke", row["id"], "--lab", lab)
    assert again.exit_code == 2 and "already revoked" in again.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--role", "worker", "--actor", "w1"), "--campaign"),
        (("--campaign", "latest", "--role", "worker", "--actor", "w1", "--expires", "7"), "7"),
        (("--campaign", "latest", "--role", "human", "--actor", "w1"), "agent role"),
        (("--campaign", "latest", "--role", "worker", "--actor", "../x"), "plain name"),
    ],
)
def test_new_refuses_bad_input_in_one_line(
    lab: Path, campaign_id: str, args: tuple[str, ...], expected: str
) -> None:
    result = rsilab("token", "new", *args, "--lab", lab)
    assert result.exit_code == 2, explain(result)
    assert result.stderr.startswith("error: ") and expected in result.stderr
    assert "Traceback" not in result.stderr


def test_revoke_of_an_unknown_id_is_a_user_error(lab: Path) -> None:
    result = rsilab("token", "revoke", "tok-000000000000", "--lab", lab)
    assert result.exit_code == 2 and "no token" in result.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--http", "10.0.0.5:8767", "--campaign", "latest"), "--allow-remote"),
        (("--http", "127.0.0.1:8767", "--campaign", "latest", "--role", "worker"), "--role"),
        (("--http", "127.0.0.1:8767", "--campaign", "latest", "--actor", "x"), "--actor"),
        (("--http", "example.org:80", "--campaign", "latest"), "not an address"),
        (("--http", "127.0.0.1:99999", "--campaign", "latest"), "not an address"),
        (("--http", "127.0.0.1:8767"), "--campaign"),
        (("--role", "worker", "--campaign", "latest", "--allow-remote"), "--http"),
    ],
)
def test_mcp_http_refuses_bad_options_before_serving(
    lab: Path, campaign_id: str, args: tuple[str, ...], expected: str
) -> None:
    result = rsilab("mcp", *args, "--lab", lab)
    assert result.exit_code == 2, explain(result)
    assert result.stderr.startswith("error: ") and expected in result.stderr
