"""``rsilab campaign new|list``."""

from __future__ import annotations

from pathlib import Path

from tests.cli.helpers import explain, rsilab


def test_new_prints_only_the_id(lab: Path) -> None:
    result = rsilab("campaign", "new", "digits", "--notes", "first try", "--lab", lab)
    assert result.exit_code == 0, explain(result)
    assert result.stdout.strip().startswith("cmp-")
    assert len(result.stdout.split()) == 1


def test_list_shows_campaigns_with_event_counts(lab: Path, campaign_id: str) -> None:
    second = rsilab("campaign", "new", "textcls", "--lab", lab).stdout.strip()
    result = rsilab("campaign", "list", "--lab", lab)
    assert result.exit_code == 0, explain(result)
    rows = {line.split()[1]: line for line in result.stdout.splitlines() if "cmp-" in line}
    assert set(rows) == {campaign_id, second}
    assert "digits" in rows[campaign_id]
    assert "running" in rows[campaign_id]
    assert rows[campaign_id].split()[-2] == "1"  # the campaign_created event


def test_list_on_an_empty_lab_says_how_to_start(lab: Path) -> None:
    result = rsilab("campaign", "list", "--lab", lab)
    assert result.exit_code == 0
    assert "start one with `rsilab run TASK`" in result.stdout
