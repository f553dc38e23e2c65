"""docs/cli.md's table of a campaign run's exit code by end reason: a row for every end
reason, each saying the code ``rsilab run`` exits with (seen through the real command for the
codes a test can reach cheaply, see test_exit_codes.py and test_json_output.py)."""

from __future__ import annotations

import re
from pathlib import Path

from rsilab.cli._common import exit_code_for
from rsilab.records import EndReason

PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _table() -> dict[str, int]:
    section = PAGE.read_text("utf-8").split("### Exit codes of a campaign run", 1)[1]
    rows = re.findall(r"^\| `([a-z_]+)` \| `(\d+)` \|$", section, flags=re.MULTILINE)
    return {reason: int(code) for reason, code in rows}


def test_every_end_reason_has_a_row_with_its_exit_code() -> None:
    table = _table()
    assert set(table) == {r.value for r in EndReason}, "docs/cli.md misses or adds a reason"
    for reason in EndReason:
        assert table[reason.value] == exit_code_for(reason), reason


def test_the_codes_are_those_of_the_exit_code_table() -> None:
    assert set(_table().values()) <= {0, 1, 130}
    assert _table()["stopped_by_user"] == 130 and _table()["budget_spent"] == 0
