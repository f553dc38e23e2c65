"""The lab's shared memory as a page: findings with their status and effect, skills and
orientations at their latest revision."""

from __future__ import annotations

from rsilab.memory import adoption_counts, lab_findings, latest_orientations, latest_skills
from rsilab.store import StoreReader
from rsilab.web._html import DASH, Html, badge, esc, join, num, pre, section, table, tag


def memory_body(store: StoreReader, task: str | None = None) -> Html:
    """Findings (of ``task`` only, when given), skills and orientations."""
    counts = adoption_counts(store)
    findings = [
        [
            esc(f.id),
            esc(f.task),
            badge(f.status),
            esc(f.claim),
            esc(
                f"{f.effect.value:+.3f} [{f.effect.low:+.3f}, {f.effect.high:+.3f}]"
                if f.effect
                else DASH
            ),
            esc(f.author or DASH),
            esc(f.origin_campaign_id or DASH),
            num(counts[f.id]),
            esc(f.supersedes or DASH),
        ]
        for f in lab_findings(store, task)
    ]
    skills = [
        [esc(s.name), num(s.version), esc(s.text), pre(s.code) if s.code else Html(DASH)]
        for s in latest_skills(store)
    ]
    orientations = [
        [esc(o.name), num(o.version), num(o.weight, 2), esc(o.text)]
        for o in latest_orientations(store)
    ]
    return join(
        [
            tag("h1", esc("Findings and skills" + (f" of {task}" if task else ""))),
            section(
                f"Findings ({len(findings)})",
                table(
                    [
                        "finding",
                        "task",
                        "status",
                        "claim",
                        "effect [95%]",
                        "author",
                        "campaign",
                        "adoptions",
                        "supersedes",
                    ],
                    findings,
                    empty="no findings published yet",
                    numeric=(7,),
                ),
                ident="findings",
            ),
            section(
                f"Skills ({len(skills)})",
                table(["skill", "version", "text", "code"], skills, empty="no skills yet"),
                ident="skills",
            ),
            section(
                f"Orientations ({len(orientations)})",
                table(
                    ["orientation", "version", "weight", "text"],
                    orientations,
                    empty="no orientations yet",
                ),
                ident="orientations",
            ),
        ]
    )
