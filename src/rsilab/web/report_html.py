"""``rsilab report CAMPAIGN --html``: the dashboard's pages of one campaign in one HTML file.

The file holds the overview (DAG, best-so-far curves, accepted versions), every direction
with its reviews, every experiment in full (for a large campaign, those that matter, with
every one still listed), the lineage with its decisions and regression
table, protocol flags, resources and the task's findings and skills, one section after
another. Links jump within the file. It has its CSS and SVG inline and no script, so it opens
anywhere, offline, as sent.
"""

from __future__ import annotations

from rsilab.orchestrator.report import campaign_resources
from rsilab.store import Lab
from rsilab.web._audit_pages import flags_body, lineage_body, resources_body
from rsilab.web._campaign_pages import (
    campaign_nav,
    direction_body,
    experiments_body,
    overview_body,
)
from rsilab.web._experiment_pages import experiment_body, read_experiment
from rsilab.web._links import AnchorLinks
from rsilab.web._memory_page import memory_body
from rsilab.web._read import CampaignView, read_campaign
from rsilab.web._templates import page, render

ALL_IN_FULL_UP_TO = 300
"""A campaign with at most this many experiments has every one in full in its report."""

LATEST_IN_FULL = 50
"""Beyond that, the latest experiments held in full (besides those that matter anyway)."""


def experiments_in_full(view: CampaignView) -> set[str] | None:
    """The experiments the report holds in full: all of them (None) for a campaign of up to
    :data:`ALL_IN_FULL_UP_TO`; else those behind a candidate, each direction's best on each
    benchmark, the first (the reference) and the latest :data:`LATEST_IN_FULL`. Every
    experiment is still listed with its scores."""
    if len(view.experiments) <= ALL_IN_FULL_UP_TO:
        return None
    chosen = {c.experiment_id for c in view.candidates if c.experiment_id}
    chosen |= {best.experiment_id for d in view.directions for best in d.best_dev.values()}
    chosen |= {e.id for e in view.experiments[:1] + view.experiments[-LATEST_IN_FULL:]}
    return chosen


def render_campaign_html(lab: Lab, campaign_id: str) -> str:
    """The whole report of ``campaign_id`` as one HTML document. Raises NotFoundError."""
    view = read_campaign(lab.store, campaign_id)
    links = AnchorLinks(experiments_in_full(view))
    shown = [e for e in view.experiments if links.shows_experiment(e.id)]
    partial = (
        f"{len(shown)} of the {len(view.experiments)} experiments are in this file in full: "
        "those behind a candidate, each direction's best, the first and the latest "
        f"{LATEST_IN_FULL}. The dashboard (rsilab ui) shows every one."
        if len(shown) < len(view.experiments)
        else ""
    )
    body = render(
        "report.html",
        overview=overview_body(view, links),
        directions=[(d.id, direction_body(view, d.id, links)) for d in view.directions],
        experiments=experiments_body(view, links),
        partial=partial,
        shown=[
            (e.id, experiment_body(view, read_experiment(lab.store, e.id), lab.artifacts, links))
            for e in shown
        ],
        lineage=lineage_body(view, links),
        flags=flags_body(view),
        resources=resources_body(view, campaign_resources(lab.store, campaign_id)),
        memory=memory_body(lab.store, view.campaign.task.name),
        lab_path=str(lab.path),
    )
    return page(f"campaign {campaign_id}", body, nav=campaign_nav(campaign_id, links))
