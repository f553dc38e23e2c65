"""``rsilab report CAMPAIGN --html``: the dashboard's pages of one campaign in one HTML file.

The file holds the overview (DAG, best-so-far curves, accepted versions), every direction
with its reviews, every experiment in full, the lineage with its decisions and regression
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
from rsilab.web._html import Html, esc, join, page, tag
from rsilab.web._links import AnchorLinks
from rsilab.web._memory_page import memory_body
from rsilab.web._read import read_campaign

LINKS = AnchorLinks()


def _part(ident: str, body: str) -> Html:
    return tag("div", body, id=ident, class_="part")


def render_campaign_html(lab: Lab, campaign_id: str) -> str:
    """The whole report of ``campaign_id`` as one HTML document. Raises NotFoundError."""
    view = read_campaign(lab.store, campaign_id)
    experiments = [
        _part(
            e.id,
            experiment_body(view, read_experiment(lab.store, e.id), lab.artifacts, LINKS),
        )
        for e in view.experiments
    ]
    directions = [_part(d.id, direction_body(view, d.id, LINKS) or "") for d in view.directions]
    body = join(
        [
            _part("top", overview_body(view, LINKS)),
            *directions,
            _part("experiments", experiments_body(view, LINKS)),
            *experiments,
            _part("lineage", lineage_body(view, LINKS)),
            _part("flags", flags_body(view)),
            _part("resources", resources_body(view, campaign_resources(lab.store, campaign_id))),
            _part("memory", memory_body(lab.store, view.campaign.task.name)),
            tag(
                "p",
                esc(
                    f"Made from the lab at {lab.path} by rsilab; every number is read "
                    "from its records."
                ),
                class_="muted",
            ),
        ]
    )
    return page(f"campaign {campaign_id}", body, nav=campaign_nav(campaign_id, LINKS))
