"""Where the dashboard's pages are: URLs on the server, or anchors in the one-file report.

The page bodies are written once and take a :class:`Links`, so the live dashboard and
``rsilab report --html`` show the same content; in the report a link to an experiment jumps
to that experiment's section of the same file.
"""

from __future__ import annotations

from collections.abc import Collection
from urllib.parse import quote, urlencode


def _q(part: str) -> str:
    return quote(part, safe="")


class Links:
    """URLs of the live dashboard."""

    static = False
    """True when the links are anchors inside one file (no server, no forms)."""

    def campaigns(self) -> str:
        """The list of campaigns."""
        return "/"

    def campaign(self, campaign_id: str) -> str:
        """A campaign's overview (DAG, curves, decisions)."""
        return f"/campaigns/{_q(campaign_id)}"

    def direction(self, campaign_id: str, direction_id: str) -> str:
        """A direction of the DAG with its experiments and reviews."""
        return f"/campaigns/{_q(campaign_id)}/directions/{_q(direction_id)}"

    def experiments(self, campaign_id: str) -> str:
        """Every experiment of a campaign."""
        return f"/campaigns/{_q(campaign_id)}/experiments"

    def experiment(self, campaign_id: str, experiment_id: str) -> str:
        """One experiment."""
        return f"/campaigns/{_q(campaign_id)}/experiments/{_q(experiment_id)}"

    def shows_experiment(self, experiment_id: str) -> bool:
        """Whether the experiment has a page to link to."""
        return True

    def compare(self, campaign_id: str, a: str = "", b: str = "") -> str:
        """Two experiments compared sample by sample (the picker when either is empty)."""
        query = urlencode({k: v for k, v in (("a", a), ("b", b)) if v})
        return f"/campaigns/{_q(campaign_id)}/compare" + (f"?{query}" if query else "")

    def lineage(self, campaign_id: str) -> str:
        """The lineage's versions, decisions and regression table."""
        return f"/campaigns/{_q(campaign_id)}/lineage"

    def flags(self, campaign_id: str) -> str:
        """Protocol flags by stage."""
        return f"/campaigns/{_q(campaign_id)}/flags"

    def resources(self, campaign_id: str) -> str:
        """Resource use per role and researcher."""
        return f"/campaigns/{_q(campaign_id)}/resources"

    def memory(self) -> str:
        """The lab's findings and skills."""
        return "/memory"


class AnchorLinks(Links):
    """Links inside one self-contained HTML file: every target is a section of it.

    ``shown`` names the experiments the file holds in full (None: all of them); the others
    are named without a link.
    """

    static = True

    def __init__(self, shown: Collection[str] | None = None) -> None:
        self.shown = None if shown is None else frozenset(shown)

    def shows_experiment(self, experiment_id: str) -> bool:
        return self.shown is None or experiment_id in self.shown

    def campaigns(self) -> str:
        return "#top"

    def campaign(self, campaign_id: str) -> str:
        return "#top"

    def direction(self, campaign_id: str, direction_id: str) -> str:
        return f"#{direction_id}"

    def experiments(self, campaign_id: str) -> str:
        return "#experiments"

    def experiment(self, campaign_id: str, experiment_id: str) -> str:
        return f"#{experiment_id}"

    def compare(self, campaign_id: str, a: str = "", b: str = "") -> str:
        return "#experiments"  # the file holds no comparisons: they are picked live

    def lineage(self, campaign_id: str) -> str:
        return "#lineage"

    def flags(self, campaign_id: str) -> str:
        return "#flags"

    def resources(self, campaign_id: str) -> str:
        return "#resources"

    def memory(self) -> str:
        return "#memory"
