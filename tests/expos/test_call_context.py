"""A CallContext made with a plain string role (as Python API callers write it)."""

from __future__ import annotations

import pytest

from rsilab.expos import CallContext
from rsilab.records import Role
from tests.expos.helpers import Bench


@pytest.mark.parametrize(("given", "held"), [("worker", Role.WORKER), ("main", Role.MAIN)])
def test_a_string_naming_a_role_is_that_role(given: str, held: Role) -> None:
    ctx = CallContext(actor="api", role=given)  # type: ignore[arg-type]
    assert ctx.role is held


def test_a_string_role_calls_tools_as_that_role(bench: Bench) -> None:
    main = CallContext(actor="api", role="main", campaign_id=bench.campaign.id)  # type: ignore[arg-type]
    created = bench.expos.call(main, "create_direction", {"title": "t", "hypothesis": "h"})
    assert created.ok, created.to_dict()
    worker = CallContext(actor="api", role="worker", campaign_id=bench.campaign.id)  # type: ignore[arg-type]
    denied = bench.expos.call(worker, "create_direction", {"title": "t", "hypothesis": "h"})
    assert denied.error is not None and denied.error.code == "permission_denied"


def test_an_unknown_role_is_refused_naming_the_roles() -> None:
    with pytest.raises(ValueError) as refused:
        CallContext(actor="api", role="boss")  # type: ignore[arg-type]
    assert str(refused.value) == (
        "unknown role 'boss'; known roles: main, worker, reviewer, leader, controller, human"
    )
