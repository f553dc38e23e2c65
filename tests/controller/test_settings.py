"""The settings table in code is the one the docs show (docs/controller.md)."""

from __future__ import annotations

from pathlib import Path

from rsilab.controller.settings import SETTINGS, rules_for, settings_table_markdown
from rsilab.tasks import Setting

DOCS = Path(__file__).resolve().parents[2] / "docs" / "controller.md"


def test_every_setting_has_rules_and_no_setting_shows_numbers() -> None:
    assert set(SETTINGS) == set(Setting)
    assert all(rules.verdict_shown == "accept/reject" for rules in SETTINGS.values())
    assert not rules_for(Setting.OPEN_GENERAL).goal_given
    feedback = {s for s, r in SETTINGS.items() if r.dev_scores_returned}
    assert feedback == {Setting.BENCHMARK_GUIDED}
    # dev scores without dev labels, or the reverse, would be incoherent
    assert all(r.dev_labels_in_workspace == r.dev_scores_returned for r in SETTINGS.values())


def test_the_docs_show_the_table_from_the_code() -> None:
    assert settings_table_markdown() in DOCS.read_text("utf-8")
