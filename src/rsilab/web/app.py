"""The dashboard's web server: a FastAPI app over one lab, serving server-rendered pages.

Every page only reads the store, except the guidance form, which records guidance through
the same function as ``rsilab guide`` (:func:`rsilab.orchestrator.research.guidance.give_guidance`).
A form post must carry the token the server put in its own page, so another web page open
in the same browser cannot post guidance to the lab; and every request must name the server
by one of its own host names (:mod:`rsilab.web._hosts`), so a page that re-points its own
name at 127.0.0.1 (DNS rebinding) cannot read that token either. Pages are read once per
ledger position (:class:`~rsilab.web._read.ViewCache`) and poll ``/api/head`` to redraw when
it moves.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated
from urllib.parse import urlencode

from fastapi import FastAPI, Form, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from markupsafe import Markup

from rsilab.errors import NotFoundError, UserError
from rsilab.orchestrator.report import (
    campaign_resources,
)
from rsilab.orchestrator.research.guidance import give_guidance
from rsilab.records import Campaign
from rsilab.store import Lab
from rsilab.store.mirror import StoreMirror
from rsilab.web._audit_pages import flags_body, lineage_body, resources_body
from rsilab.web._campaign_pages import (
    GuidanceForm,
    campaign_nav,
    campaign_rows,
    campaigns_body,
    direction_body,
    experiments_body,
    overview_body,
)
from rsilab.web._experiment_pages import (
    ExperimentRecords,
    compare_body,
    compare_picker,
    default_pair,
    experiment_body,
    read_experiment,
)
from rsilab.web._hosts import LOOPBACK_NAMES, LocalOnly
from rsilab.web._links import Links
from rsilab.web._memory_page import memory_body
from rsilab.web._read import MIRRORED_KINDS, CampaignView, ReadCache, ViewCache, read_campaign
from rsilab.web._templates import page, render
from rsilab.web.progress import baseline_progress

LINKS = Links()


def create_app(lab: Path | str | None = None, *, bound: str | None = None) -> FastAPI:
    """The dashboard app for the lab at ``lab`` (default: the usual lab resolution).

    The lab is opened now, so a missing or unreadable lab raises LabError before anything
    is served; it is closed when the app shuts down. Requests must name the server as
    127.0.0.1, localhost or ::1, or as ``bound`` (an address the caller binds explicitly);
    others are refused (:class:`~rsilab.web._hosts.LocalOnly`: 421, or 403 for a form post
    from another site), so a DNS-rebinding page can neither read a page nor post.
    """
    opened = Lab.open(lab)
    import scipy.special  # noqa: F401 - the intervals use it; imported now, not on a first page

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            opened.close()

    app = FastAPI(title="rsilab dashboard", lifespan=lifespan, docs_url=None, redoc_url=None)
    _Routes(opened, secrets.token_urlsafe(24)).install(app)
    app.add_middleware(LocalOnly, names=(*LOOPBACK_NAMES, *((bound,) if bound else ())))
    return app


class _Routes:
    """The app's pages over one opened lab."""

    def __init__(self, lab: Lab, token: str) -> None:
        self.lab = lab
        self.reads = StoreMirror(lab.store, MIRRORED_KINDS, events=True)
        """Every page reads through this copy; only guidance is written, to ``lab.store``."""
        self.token = token
        self.cache = ViewCache()
        self.kept = ReadCache()
        for campaign in self.reads.query_as(Campaign):
            # Fills what stays true between reads (each experiment's dev scores, each
            # accepted version's gains over the baseline) now, at start, so no first page
            # pays for it; the pages themselves still read their campaign when asked.
            read_campaign(self.reads, campaign.id, self.kept)

    def seq(self) -> int:
        """The ledger position pages are read at, after taking in what happened since."""
        self.reads.refresh()
        return self.reads.seq

    def view(self, campaign_id: str, seq: int) -> CampaignView:
        """The campaign's view at ledger position ``seq`` (404 when unknown)."""
        try:
            return self.cache.get(
                ("campaign", campaign_id),
                seq,
                lambda: read_campaign(self.reads, campaign_id, self.kept),
            )
        except NotFoundError:
            raise _Missing(f"no campaign {campaign_id!r} in this lab") from None

    def html(
        self, title: str, body: Markup, seq: int, campaign_id: str | None = None
    ) -> HTMLResponse:
        """The page, marked with the ledger position its content was read at (so it redraws
        on any later event, even one recorded while it was being made)."""
        nav = (
            campaign_nav(campaign_id, LINKS)
            if campaign_id
            else [(LINKS.campaigns(), "Campaigns"), (LINKS.memory(), "Findings & skills")]
        )
        return HTMLResponse(page(title, body, nav=nav, head_seq=seq))

    def install(self, app: FastAPI) -> None:
        @app.exception_handler(_Missing)
        async def missing(_: Request, exc: _Missing) -> HTMLResponse:
            body = render(
                "message.html", heading="Not found", lines=[str(exc)], back=LINKS.campaigns()
            )
            return HTMLResponse(page("not found", body), status_code=404)

        get = app.get

        get("/api/head")(self.api_head)
        get("/", response_class=HTMLResponse)(self.campaigns)
        get("/memory", response_class=HTMLResponse)(self.memory)
        get("/campaigns/{campaign_id}", response_class=HTMLResponse)(self.overview)
        get("/campaigns/{campaign_id}/directions/{direction_id}", response_class=HTMLResponse)(
            self.direction
        )
        get("/campaigns/{campaign_id}/experiments", response_class=HTMLResponse)(self.experiments)
        get("/campaigns/{campaign_id}/experiments/{experiment_id}", response_class=HTMLResponse)(
            self.experiment
        )
        get("/campaigns/{campaign_id}/compare", response_class=HTMLResponse)(self.compare)
        get("/campaigns/{campaign_id}/lineage", response_class=HTMLResponse)(self.lineage)
        get("/campaigns/{campaign_id}/flags", response_class=HTMLResponse)(self.flags)
        get("/campaigns/{campaign_id}/resources", response_class=HTMLResponse)(self.resources)
        app.post("/campaigns/{campaign_id}/guidance")(self.guidance)

    # -- pages -----------------------------------------------------------------------------

    def api_head(self) -> JSONResponse:
        """The ledger's sequence: pages redraw when it moves."""
        return JSONResponse({"seq": self.seq()}, headers={"Cache-Control": "no-store"})

    def campaigns(self) -> HTMLResponse:
        def read() -> Markup:
            return campaigns_body(campaign_rows(self.reads), LINKS)

        seq = self.seq()
        return self.html("campaigns", self.cache.get(("campaigns",), seq, read), seq)

    def memory(self, task: str | None = None) -> HTMLResponse:
        seq = self.seq()
        body = self.cache.get(("memory", task), seq, lambda: memory_body(self.reads, task))
        return self.html("findings and skills", body, seq)

    def overview(self, campaign_id: str, guided: str = "", error: str = "") -> HTMLResponse:
        seq = self.seq()
        view = self.view(campaign_id, seq)
        running = not view.campaign.is_finished()
        form = GuidanceForm(f"{LINKS.campaign(campaign_id)}/guidance", self.token, guided, error)
        baseline = self.cache.get(
            ("baseline", campaign_id),
            seq,
            lambda: baseline_progress(self.reads, view.campaign, view.lineage),
        )
        return self.html(
            f"campaign {campaign_id}",
            overview_body(view, LINKS, guidance=form if running else None, baseline=baseline),
            seq,
            campaign_id,
        )

    def direction(self, campaign_id: str, direction_id: str) -> HTMLResponse:
        seq = self.seq()
        body = direction_body(self.view(campaign_id, seq), direction_id, LINKS)
        if body is None:
            raise _Missing(f"no direction {direction_id!r} in campaign {campaign_id}")
        return self.html(f"direction {direction_id}", body, seq, campaign_id)

    def experiments(self, campaign_id: str, page: int = 1) -> HTMLResponse:
        seq = self.seq()
        view = self.view(campaign_id, seq)
        body = self.cache.get(
            ("experiments", campaign_id, page), seq, lambda: experiments_body(view, LINKS, page)
        )
        return self.html(f"experiments of {campaign_id}", body, seq, campaign_id)

    def experiment(self, campaign_id: str, experiment_id: str) -> HTMLResponse:
        seq = self.seq()
        view = self.view(campaign_id, seq)
        found = self._experiment(campaign_id, experiment_id, seq)
        body = experiment_body(view, found, self.lab.artifacts, LINKS)
        return self.html(f"experiment {experiment_id}", body, seq, campaign_id)

    def compare(self, campaign_id: str, a: str = "", b: str = "", page: int = 1) -> HTMLResponse:
        """Two experiments sample by sample; with none chosen, the reference against the
        best (:func:`~rsilab.web._experiment_pages.default_pair`)."""
        seq = self.seq()
        view = self.view(campaign_id, seq)
        why = ""
        if not a or not b:
            pair = default_pair(view)
            if pair is None:
                return self.html("compare", compare_picker(view, LINKS), seq, campaign_id)
            a, b, why = pair
        body = compare_body(
            view,
            self._experiment(campaign_id, a, seq),
            self._experiment(campaign_id, b, seq),
            LINKS,
            page=page,
            defaulted=why,
        )
        return self.html(f"compare {a} and {b}", body, seq, campaign_id)

    def lineage(self, campaign_id: str) -> HTMLResponse:
        seq = self.seq()
        body = lineage_body(self.view(campaign_id, seq), LINKS)
        return self.html("lineage", body, seq, campaign_id)

    def flags(self, campaign_id: str) -> HTMLResponse:
        seq = self.seq()
        body = flags_body(self.view(campaign_id, seq))
        return self.html("protocol flags", body, seq, campaign_id)

    def resources(self, campaign_id: str) -> HTMLResponse:
        seq = self.seq()
        view = self.view(campaign_id, seq)
        used = self.cache.get(
            ("resources", campaign_id), seq, lambda: campaign_resources(self.reads, campaign_id)
        )
        return self.html("resources", resources_body(view, used), seq, campaign_id)

    def guidance(
        self,
        campaign_id: str,
        text: Annotated[str, Form()] = "",
        by: Annotated[str, Form()] = "",
        token: Annotated[str, Form()] = "",
    ) -> Response:
        """Record guidance typed into the overview page, as ``rsilab guide`` does."""
        if not secrets.compare_digest(token, self.token):
            said = (
                "this form was not made by this dashboard (its token does not match); "
                "reload the campaign page and send it from there"
            )
            body = render("message.html", heading="Refused", lines=[said], back="")
            return HTMLResponse(page("refused", body), status_code=403)
        target = LINKS.campaign(campaign_id)
        try:
            given = give_guidance(self.lab.store, campaign_id, text, by.strip() or "dashboard")
        except UserError as exc:
            message = f"{exc.message}" + (f" ({exc.hint})" if exc.hint else "")
            return RedirectResponse(
                f"{target}?{urlencode({'error': message})}#guidance", status_code=303
            )
        return RedirectResponse(
            f"{target}?{urlencode({'guided': given.id})}#guidance", status_code=303
        )

    # -- helpers -----------------------------------------------------------------------------

    def _experiment(self, campaign_id: str, experiment_id: str, seq: int) -> ExperimentRecords:
        try:
            found = self.cache.get(
                ("experiment", experiment_id),
                seq,
                lambda: read_experiment(self.reads, experiment_id),
            )
        except NotFoundError:
            raise _Missing(f"no experiment {experiment_id!r} in this lab") from None
        if found.experiment.campaign_id != campaign_id:
            raise _Missing(f"experiment {experiment_id} is not part of campaign {campaign_id}")
        return found


class _Missing(Exception):
    """A page asked for something the lab does not hold (answered with 404)."""


__all__ = ["create_app"]
