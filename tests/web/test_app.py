"""The dashboard over HTTP on a lab made by a real campaign: pages, 404s, guidance, live data."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from rsilab.errors import LabError
from rsilab.records import Campaign, Direction, Experiment, Guidance, Job
from rsilab.store import Lab
from rsilab.web.app import create_app
from tests.cli.helpers import explain, rsilab
from tests.web.serving import Served, serve


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lab with one finished 5-experiment campaign on synthetic."""
    path = tmp_path_factory.mktemp("web") / "lab"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RSILAB_SANDBOX", "process")
        assert rsilab("init", "--lab", path).exit_code == 0
        ran = rsilab("run", "synthetic", "--budget", "experiments=5", "--seed", "2", "--lab", path)
        assert ran.exit_code == 0, explain(ran)
    return path


@pytest.fixture(scope="module")
def served(lab: Path) -> Iterator[Served]:
    with serve(lab) as running:
        yield running


def finished(lab: Path) -> tuple[Campaign, list[Experiment]]:
    with Lab.open(lab) as opened:
        campaign = opened.store.query_as(Campaign)[0]
        exps = opened.store.query_as(Experiment, campaign_id=campaign.id)
    return campaign, exps


def test_every_page_of_a_campaign_answers_with_what_the_store_holds(
    served: Served, lab: Path
) -> None:
    campaign, exps = finished(lab)
    cid = campaign.id
    home = served.get("/")
    assert home.status == 200 and cid in home.text and "synthetic" in home.text
    dev = [
        m.value
        for e in exps
        for m in e.metrics
        if m.name == "quality" and m.split == "dev" and m.source == "controller"
    ]
    assert dev and f"quality {max(dev):.3f}" in home.text  # the best dev target score
    overview = served.get(f"/campaigns/{cid}")
    assert overview.status == 200
    assert f"{len(exps)} of 5" in overview.text  # experiments used of the budget
    with Lab.open(lab) as opened:
        directions = opened.store.query_as(Direction, campaign_id=cid)
    assert overview.text.count('class="dag-node"') == len(directions)
    assert 'name="token"' not in overview.text  # a finished campaign takes no guidance
    listing = served.get(f"/campaigns/{cid}/experiments")
    assert all(e.id in listing.text for e in exps)
    for path in ("lineage", "flags", "resources", "compare"):
        assert served.get(f"/campaigns/{cid}/{path}").status == 200, path
    assert served.get("/memory").status == 200
    direction = served.get(f"/campaigns/{cid}/directions/{directions[0].id}")
    assert direction.status == 200 and directions[0].hypothesis in _unescaped(direction.text)


def test_an_experiment_page_shows_its_config_jobs_scores_and_diff(
    served: Served, lab: Path
) -> None:
    campaign, exps = finished(lab)
    exp = exps[-1]
    page = served.get(f"/campaigns/{campaign.id}/experiments/{exp.id}")
    assert page.status == 200
    text = _unescaped(page.text)
    for key, value in exp.config.items():
        assert f'"{key}": {value!r}'.replace("'", '"') in text or str(value) in text
    with Lab.open(lab) as opened:
        jobs = opened.store.query_as(Job, fields={"experiment_id": exp.id})
    assert jobs and all(j.id in text for j in jobs)
    assert "Workspace diff" in text and "config.json (modified)" in text
    assert "dev_evaluated" in text  # the ledger events that concern it


def test_two_experiments_are_compared_sample_by_sample(served: Served, lab: Path) -> None:
    campaign, exps = finished(lab)
    a, b = exps[0].id, exps[1].id
    page = served.get(f"/campaigns/{campaign.id}/compare?a={a}&b={b}")
    assert page.status == 200
    assert "dev scores by sample" in page.text and "a - b (paired, 95%)" in page.text
    rows = re.findall(r'<table class="samples">.*?</table>', page.text, re.S)
    assert rows and rows[0].count("<tr>") - 1 > 2


def test_unknown_things_are_404s_that_say_what_is_missing(served: Served, lab: Path) -> None:
    campaign, _ = finished(lab)
    missing = served.get("/campaigns/cmp-000000000000")
    assert missing.status == 404 and "no campaign 'cmp-000000000000'" in _unescaped(missing.text)
    exp = served.get(f"/campaigns/{campaign.id}/experiments/exp-000000000000")
    assert exp.status == 404 and "no experiment" in exp.text
    direction = served.get(f"/campaigns/{campaign.id}/directions/dir-000000000000")
    assert direction.status == 404 and "no direction" in direction.text


def test_guidance_needs_the_pages_token_and_is_recorded_like_rsilab_guide(
    served: Served, lab: Path
) -> None:
    made = rsilab("campaign", "new", "synthetic", "--lab", lab)
    assert made.exit_code == 0, explain(made)
    cid = made.stdout.strip()
    page = served.get(f"/campaigns/{cid}")
    token = re.search(r'name="token" value="([^"]+)"', page.text)
    assert token is not None, "a running campaign's page has the guidance form"
    forged = served.post(
        f"/campaigns/{cid}/guidance", urllib.parse.urlencode({"text": "x", "token": "no"}).encode()
    )
    assert forged.status == 403 and "token" in forged.text
    sent = served.post(
        f"/campaigns/{cid}/guidance",
        urllib.parse.urlencode(
            {"text": "try a wider model", "by": "ada", "token": token[1]}
        ).encode(),
    )
    assert sent.status == 303
    empty = served.post(
        f"/campaigns/{cid}/guidance", urllib.parse.urlencode({"token": token[1]}).encode()
    )
    assert empty.status == 303  # redirected back with the reason
    with Lab.open(lab) as opened:
        given = opened.store.query_as(Guidance, campaign_id=cid)
    assert [(g.text, g.given_by) for g in given] == [("try a wider model", "ada")]
    shown = served.get(f"/campaigns/{cid}?error=the+guidance+is+empty")
    assert "not recorded: the guidance is empty" in shown.text


def test_pages_are_read_again_when_the_ledger_moves(served: Served, lab: Path) -> None:
    before = served.get("/api/head")
    seq = int(re.findall(r"\d+", before.text)[0])
    made = rsilab("campaign", "new", "synthetic", "--notes", "fresh one", "--lab", lab)
    assert made.exit_code == 0, explain(made)
    after = served.get("/api/head")
    assert int(re.findall(r"\d+", after.text)[0]) > seq
    assert made.stdout.strip() in served.get("/").text


def test_no_lab_is_refused_before_anything_is_served(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="no rsilab lab"):
        create_app(tmp_path / "nowhere")


def _unescaped(text: str) -> str:
    import html

    return html.unescape(text)


def test_the_experiments_page_is_paged(
    served: Served, lab: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rsilab.web import _campaign_pages

    monkeypatch.setattr(_campaign_pages, "EXPERIMENTS_PER_PAGE", 2)
    campaign, exps = finished(lab)
    ordered = sorted(exps, key=lambda e: (e.created_at, e.id))
    middle = served.get(f"/campaigns/{campaign.id}/experiments?page=2").text
    assert "3 to 4 (page 2 of 3)" in middle
    assert [e.id in middle for e in ordered] == [False, False, True, True, False]
    assert "?page=1" in middle and "?page=3" in middle
    last = served.get(f"/campaigns/{campaign.id}/experiments?page=99").text
    assert "5 to 5 (page 3 of 3)" in last and "next page" not in last


def test_a_campaign_whose_improver_ran_on_the_host_is_marked(tmp_path: Path) -> None:
    """`rsilab campaign new` serves a client on the host: its page and report say its improver
    was not sandboxed; a campaign rsilab ran in bubblewrap carries no such mark."""
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    made = rsilab("campaign", "new", "synthetic", "--lab", lab)
    assert made.exit_code == 0, explain(made)
    cid = made.stdout.strip()
    with serve(lab) as running:
        page = _unescaped(running.get(f"/campaigns/{cid}").text)
    assert "<strong>Unsandboxed: </strong>its improver ran on the host, not in the sandbox" in page
    report = rsilab("report", cid, "--lab", lab)
    assert report.exit_code == 0, explain(report)
    assert "**Unsandboxed:** its improver ran on the host" in report.stdout
