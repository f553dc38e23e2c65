"""The settings table: what each guidance setting lets the improver have.

One table, read by the tools that enforce it (``prepare_workspace`` and ``run_job`` decide
what lands in the workspace and what a dev evaluation returns) and printed in docs/controller.md.
Verdicts are a bare accept/reject in every setting: private numbers never reach an agent.
"""

from __future__ import annotations

from dataclasses import dataclass

from rsilab.tasks import Setting


@dataclass(frozen=True)
class SettingRules:
    """What one setting allows; ``why`` justifies the row."""

    goal_given: bool
    dev_labels_in_workspace: bool
    dev_scores_returned: bool
    verdict_shown: str
    why: str


SETTINGS: dict[Setting, SettingRules] = {
    Setting.OPEN_GENERAL: SettingRules(
        goal_given=False,
        dev_labels_in_workspace=False,
        dev_scores_returned=False,
        verdict_shown="accept/reject",
        why="no goal and no benchmark feedback: the improver gets the system, its train data "
        "and dev inputs without labels, and must judge its changes on folds of the train tier",
    ),
    Setting.CAPABILITY_DIRECTED: SettingRules(
        goal_given=True,
        dev_labels_in_workspace=False,
        dev_scores_returned=False,
        verdict_shown="accept/reject",
        why="a broad goal but no benchmark feedback: dev labels would let the improver score "
        "itself on the benchmark, so only dev inputs are given",
    ),
    Setting.BENCHMARK_GUIDED: SettingRules(
        goal_given=True,
        dev_labels_in_workspace=True,
        dev_scores_returned=True,
        verdict_shown="accept/reject",
        why="the named benchmark with its feedback: dev labels and per-sample dev scores are "
        "the feedback; the private accept and final tiers stay with the controller",
    ),
}
"""Every setting's rules. The verdict is bare in all: no private number is ever returned."""


def rules_for(setting: Setting) -> SettingRules:
    """The rules of ``setting``."""
    return SETTINGS[setting]


def settings_table_markdown() -> str:
    """The table as Markdown, as docs/controller.md shows it."""
    yes = {True: "yes", False: "no"}
    lines = [
        "| setting | goal given | dev labels in the workspace | dev scores returned "
        "| verdict shown | why |",
        "|---|---|---|---|---|---|",
    ]
    for setting, rules in SETTINGS.items():
        lines.append(
            f"| `{setting.value}` | {yes[rules.goal_given]} | "
            f"{yes[rules.dev_labels_in_workspace]} | {yes[rules.dev_scores_returned]} | "
            f"{rules.verdict_shown} (no numbers) | {rules.why} |"
        )
    return "\n".join(lines)
