"""The lab's shared memory as a page: findings with their status and effect, skills and
orientations at their latest revision."""

from __future__ import annotations

from markupsafe import Markup

from rsilab.memory import adoption_counts, lab_findings, latest_orientations, latest_skills
from rsilab.store import StoreReader
from rsilab.web._templates import render


def memory_body(store: StoreReader, task: str | None = None) -> Markup:
    """Findings (of ``task`` only, when given), skills and orientations."""
    return render(
        "memory.html",
        task=task,
        counts=adoption_counts(store),
        findings=lab_findings(store, task),
        skills=latest_skills(store),
        orientations=latest_orientations(store),
    )
