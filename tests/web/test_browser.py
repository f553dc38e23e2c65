"""The dashboard in a real browser: headless Chromium, driven by Playwright, over a real lab.

One short synthetic campaign is run once for the module; the dashboard serves its lab on
127.0.0.1 and every test checks what a page shows against the lab's records. A screenshot of
every page visited goes to $RSILAB_TEST_ARTIFACTS (default .test-artifacts/screenshots).
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from rsilab.records import (
    Campaign,
    Candidate,
    DataTier,
    Direction,
    Evaluation,
    Experiment,
    Guidance,
    Job,
    ProtocolFlag,
    SystemVersion,
)
from rsilab.store import Lab
from tests.cli.helpers import explain, rsilab
from tests.web.browsing import WAIT_MS, open_page, row_of, snap
from tests.web.conftest import CHROMIUM

_SETUP = "`make browser-deps` installs Debian's chromium with apt-get; `make install` playwright"
if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} is missing ({_SETUP})", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason=f"playwright is not installed ({_SETUP})")

from playwright.sync_api import Page, expect  # noqa: E402

if TYPE_CHECKING:
    from tests.web.conftest import BrowserLab, Dashboard, Traffic

pytestmark = pytest.mark.usefixtures("lab_env")


def make_campaign(lab: BrowserLab) -> str:
    """``rsilab campaign new synthetic`` in the lab: the ledger moves. Its id."""
    made = rsilab("campaign", "new", "synthetic", "--lab", lab.path)
    assert made.exit_code == 0, explain(made)
    return made.stdout.strip()


@pytest.fixture(scope="module")
def running_campaign(browser_lab: BrowserLab) -> str:
    """A campaign made by ``rsilab campaign new``: running, with no experiments yet."""
    with pytest.MonkeyPatch.context() as mp:  # made before the test's own lab_env
        mp.setenv("RSILAB_KEY_DIR", str(browser_lab.key_dir))
        made = rsilab("campaign", "new", "synthetic", "--lab", browser_lab.path)
    assert made.exit_code == 0, explain(made)
    return made.stdout.strip()


def dev_benchmarks(lab: Lab, experiment_ids: set[str]) -> set[str]:
    return {
        e.benchmark
        for e in lab.store.query_as(Evaluation)
        if e.tier == DataTier.DEV and e.subject_id in experiment_ids
    }


# -- 1. campaigns and a campaign's overview ---------------------------------------------------


def test_campaigns_page_lists_the_campaign(
    page: Page, dashboard: Dashboard, store: Lab, artifacts_dir: Path
) -> None:
    cid = dashboard.lab.campaign_id
    campaign = store.store.get_as(cid, Campaign)
    open_page(page, dashboard, "/")
    snap(page, artifacts_dir, "campaigns")
    cells = row_of(page, cid).locator("td")
    expect(cells.nth(1)).to_have_text(campaign.task.name)
    expect(cells.nth(2)).to_have_text(str(campaign.state))
    assert campaign.state == "finished"


def test_campaign_page_shows_the_store(
    page: Page, dashboard: Dashboard, store: Lab, artifacts_dir: Path
) -> None:
    cid = dashboard.lab.campaign_id
    experiments = store.store.query_as(Experiment, campaign_id=cid)
    directions = store.store.query_as(Direction, campaign_id=cid)
    benchmarks = dev_benchmarks(store, {e.id for e in experiments})
    assert len(experiments) == 6 and directions and benchmarks

    open_page(page, dashboard, f"/campaigns/{cid}")
    snap(page, artifacts_dir, "campaign")
    card = page.locator(".card", has_text=re.compile(r"experiments$")).locator("b")
    expect(card).to_have_text(re.compile(rf"^{len(experiments)}( of \d+)?$"))

    nodes = page.locator("svg.dag a.dag-node")  # the start version is an a.dag-start
    expect(nodes).to_have_count(len(directions))
    shown = {nodes.nth(i).get_attribute("data-direction-id") for i in range(nodes.count())}
    assert shown == {d.id for d in directions}

    curves = page.locator("#curves div.curve")
    expect(curves).to_have_count(len(benchmarks))
    drawn = {curves.nth(i).get_attribute("data-benchmark") for i in range(curves.count())}
    assert drawn == benchmarks
    for i in range(curves.count()):
        expect(curves.nth(i).locator("svg.chart")).not_to_have_count(0)
        expect(curves.nth(i).locator("svg.chart path.series").first).to_be_attached()

    table_rows = page.locator("#dag details table tbody tr")
    expect(table_rows).to_have_count(len(directions))
    for d in directions:
        expect(row_of(page, d.title, within="#dag details table")).to_have_count(1)


# -- 2. click-through: DAG node -> direction -> experiment -> comparison ---------------------


def shared_samples(lab: Lab, a: str, b: str) -> dict[str, list[tuple[float, float]]]:
    """Per benchmark both were dev-scored on: (mean of a, mean of b) per sample that every
    evaluation epoch of both scored."""
    out: dict[str, list[tuple[float, float]]] = {}
    dev = [e for e in lab.store.query_as(Evaluation) if e.tier == DataTier.DEV]
    by_subject = {s: [e for e in dev if e.subject_id == s] for s in (a, b)}
    benches = {e.benchmark for e in by_subject[a]} & {e.benchmark for e in by_subject[b]}
    for bench in sorted(benches):
        scores: dict[str, dict[tuple[str, int], dict[str, float]]] = {a: {}, b: {}}
        for subject in (a, b):
            for ev in by_subject[subject]:
                if ev.benchmark == bench:
                    for s in ev.samples:
                        scores[subject].setdefault((ev.id, s.epoch), {})[s.sample_id] = s.score
        rows_a, rows_b = list(scores[a].values()), list(scores[b].values())
        common = set.intersection(*(set(r) for r in rows_a + rows_b))
        out[bench] = [(_mean(rows_a, s), _mean(rows_b, s)) for s in sorted(common)]
    return out


def _mean(rows: list[dict[str, float]], sample: str) -> float:
    return sum(r[sample] for r in rows) / len(rows)


def test_click_through_to_a_comparison(
    page: Page, dashboard: Dashboard, store: Lab, artifacts_dir: Path
) -> None:
    cid = dashboard.lab.campaign_id
    experiments = store.store.query_as(Experiment, campaign_id=cid)
    direction = next(
        d
        for d in store.store.query_as(Direction, campaign_id=cid)
        if any(e.direction_id == d.id for e in experiments)
    )
    exp = next(e for e in experiments if e.direction_id == direction.id)

    open_page(page, dashboard, f"/campaigns/{cid}")
    page.locator(f'a.dag-node[data-direction-id="{direction.id}"]').click()
    expect(page).to_have_url(dashboard.url(f"/campaigns/{cid}/directions/{direction.id}"))
    expect(page.locator("main h1")).to_contain_text(direction.title)
    expect(page.locator("main dl.facts")).to_contain_text(direction.hypothesis)
    snap(page, artifacts_dir, "direction")

    page.locator(f'main a:text-is("{exp.id}")').first.click()
    expect(page).to_have_url(dashboard.url(f"/campaigns/{cid}/experiments/{exp.id}"))
    expect(page.locator("main h1")).to_contain_text(exp.id)
    assert json.loads(page.locator("main pre.json").first.inner_text()) == exp.config
    jobs = store.store.query_as(Job, fields={"experiment_id": exp.id})
    assert jobs
    for job in jobs:
        expect(page.locator("main table td", has_text=re.compile(f"^{job.id}$"))).to_have_count(1)
    snap(page, artifacts_dir, "experiment")

    page.locator("main dl.facts a[href*='/compare?']").click()
    expect(page).to_have_url(re.compile(r"/compare\?a=.+&b=.+"))
    query = urllib.parse.parse_qs(urllib.parse.urlparse(page.url).query)
    a, b = query["a"][0], query["b"][0]
    assert a == exp.id and b != a
    expect(page.locator("main h1").last).to_have_text(f"Compare {a} (a) with {b} (b)")
    expected = shared_samples(store, a, b)
    assert expected, "the two experiments share no dev-scored benchmark"
    tables = page.locator("main table.samples")
    expect(tables).to_have_count(len(expected))
    for i, (bench, samples) in enumerate(expected.items()):
        expect(tables.nth(i).locator("tbody tr")).to_have_count(min(25, len(samples)))
        heading = page.locator(f'h2:text-is("{bench}: dev scores by sample")')
        section = page.locator("main section", has=heading)
        difference = section.locator('dt:text-is("a - b (paired, 95%)") + dd')
        text = difference.inner_text()
        found = re.fullmatch(r"([+-]\d+\.\d{3}) \[([+-]\d+\.\d{3}), ([+-]\d+\.\d{3})\]", text)
        assert found, f"{bench}: paired difference shown as {text!r}"
        value, low, high = (float(x) for x in found.groups())
        mean_diff = sum(x - y for x, y in samples) / len(samples)
        assert abs(value - mean_diff) < 1.5e-3 and low <= value <= high
        counts = section.locator('dt:text-is("samples") + dd')
        expect(counts).to_contain_text(re.compile(rf"^{len(samples)}: a higher on \d+"))
    snap(page, artifacts_dir, "compare")


# -- 3. lineage, flags, resources, memory ----------------------------------------------------


def test_lineage_page_shows_every_version_and_candidate(
    page: Page, dashboard: Dashboard, store: Lab, artifacts_dir: Path
) -> None:
    cid = dashboard.lab.campaign_id
    campaign = store.store.get_as(cid, Campaign)
    versions = store.store.query_as(
        SystemVersion, fields={"task": campaign.task.name, "lineage": "main"}
    )
    candidates = store.store.query_as(Candidate, campaign_id=cid)
    assert versions and candidates
    open_page(page, dashboard, f"/campaigns/{cid}/lineage")
    snap(page, artifacts_dir, "lineage")
    main = page.locator("main")
    for v in versions:
        expect(
            main.locator("td", has_text=re.compile(f"^{re.escape(v.label)}$")).first
        ).to_be_visible()
        expect(main).to_contain_text(v.id)
    for c in candidates:
        expect(main.locator("#decisions td", has_text=re.compile(f"^{c.id}$"))).to_have_count(1)


def test_flags_resources_and_memory_pages_open(
    page: Page, dashboard: Dashboard, store: Lab, artifacts_dir: Path
) -> None:
    cid = dashboard.lab.campaign_id
    flags = store.store.query_as(ProtocolFlag, campaign_id=cid)
    open_page(page, dashboard, f"/campaigns/{cid}/flags")
    expect(page.locator("main h1")).to_have_text(f"Protocol flags of {cid}: {len(flags)}")
    snap(page, artifacts_dir, "flags")

    jobs = store.store.query_as(Job, campaign_id=cid)
    kinds = {str(j.kind) for j in jobs}
    open_page(page, dashboard, f"/campaigns/{cid}/resources")
    expect(page.locator("main h1")).to_have_text(f"Resources of {cid}")
    for kind in kinds:
        count = sum(1 for j in jobs if str(j.kind) == kind)
        row = page.locator("main tr", has=page.locator(f'td:text-is("{kind}")')).first
        expect(row.locator("td").nth(1)).to_have_text(str(count))
    snap(page, artifacts_dir, "resources")

    open_page(page, dashboard, "/memory")
    expect(page.locator("main h1")).to_have_text("Findings and skills")
    expect(page.locator("main section#findings h2")).to_contain_text("Findings (")
    snap(page, artifacts_dir, "memory")


# -- 4. live update --------------------------------------------------------------------------


def test_campaigns_page_follows_the_lab_without_reloading(
    page: Page, dashboard: Dashboard, artifacts_dir: Path
) -> None:
    open_page(page, dashboard, "/")
    page.evaluate("window.__notReloaded = true")
    made = rsilab("campaign", "new", "synthetic", "--lab", dashboard.lab.path)
    assert made.exit_code == 0, explain(made)
    new_id = made.stdout.strip()
    with Lab.open(dashboard.lab.path) as lab:
        head = lab.store.head()[0]
    expect(row_of(page, new_id)).to_have_count(1, timeout=WAIT_MS)
    expect(page.locator("#live-note")).to_have_text(f"live · ledger event {head}")
    assert page.evaluate("window.__notReloaded === true"), "the page was reloaded"
    snap(page, artifacts_dir, "campaigns-live")


# -- 5. guidance -----------------------------------------------------------------------------


def test_guidance_form_records_guidance(
    page: Page, dashboard: Dashboard, running_campaign: str, artifacts_dir: Path
) -> None:
    with Lab.open(dashboard.lab.path) as lab:
        assert not lab.store.get_as(running_campaign, Campaign).is_finished()
    open_page(page, dashboard, f"/campaigns/{dashboard.lab.campaign_id}")
    expect(page.locator("main form.guide")).to_have_count(0)  # finished: nothing to guide

    text = f"try a wider network ({uuid.uuid4().hex[:8]})"
    open_page(page, dashboard, f"/campaigns/{running_campaign}")
    form = page.locator("main form.guide")
    form.locator("textarea[name=text]").fill(text)
    # The ledger moves while the reader writes: the page waits instead of redrawing.
    make_campaign(dashboard.lab)
    expect(page.locator("#live-note")).to_contain_text("paused while you write", timeout=WAIT_MS)
    expect(form.locator("textarea[name=text]")).to_have_value(text)
    form.locator("input[name=by]").fill("browser test")
    form.locator("button[type=submit]").click()
    expect(page.locator("#guidance")).to_contain_text("recorded", timeout=WAIT_MS)
    snap(page, artifacts_dir, "guidance")

    with Lab.open(dashboard.lab.path) as lab:
        given = lab.store.query_as(Guidance, campaign_id=running_campaign)
    (recorded,) = [g for g in given if g.text == text]
    assert recorded.given_by == "browser test"
    expect(page.locator("#guidance")).to_contain_text(f"guidance {recorded.id} recorded")


@pytest.mark.parametrize("token", ["", "not-the-token"])
def test_guidance_without_the_token_is_refused(
    dashboard: Dashboard, running_campaign: str, token: str
) -> None:
    text = f"posted from elsewhere ({uuid.uuid4().hex[:8]})"
    data = urllib.parse.urlencode({"text": text, "token": token}).encode()
    request = urllib.request.Request(
        dashboard.url(f"/campaigns/{running_campaign}/guidance"), data=data, method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 403
    refused.value.close()
    with Lab.open(dashboard.lab.path) as lab:
        assert not lab.store.query_as(Guidance, text=text)


# -- 6. offline ------------------------------------------------------------------------------


def test_dashboard_requests_only_its_own_server(
    page: Page, dashboard: Dashboard, traffic: Traffic, artifacts_dir: Path
) -> None:
    cid = dashboard.lab.campaign_id
    for path in ("/", f"/campaigns/{cid}", f"/campaigns/{cid}/experiments", "/memory"):
        open_page(page, dashboard, path)
    with page.expect_request(dashboard.url("/api/head"), timeout=WAIT_MS):
        pass  # the live poll has run at least once
    snap(page, artifacts_dir, "memory-polled")
    assert traffic.requests
    elsewhere = [u for u in traffic.requests if not u.startswith(dashboard.base + "/")]
    assert not elsewhere, f"requests beyond the dashboard: {elsewhere}"
    assert not traffic.page_errors


def open_report(page: Page, report: Path) -> list[str]:
    """Open the report file; every request the page makes."""
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url))
    response = page.goto(report.as_uri())
    assert response is not None and response.ok
    return seen


def test_html_report_works_offline(
    page: Page, browser_lab: BrowserLab, store: Lab, artifacts_dir: Path
) -> None:
    seen = open_report(page, browser_lab.report)
    snap(page, artifacts_dir, "report")
    assert seen == [browser_lab.report.as_uri()], f"the report fetched: {seen}"
    expect(page.locator("script")).to_have_count(0)
    assert "<script" not in browser_lab.report.read_text().lower()
    expect(page).to_have_title(re.compile(re.escape(browser_lab.campaign_id)))

    experiments = store.store.query_as(Experiment, campaign_id=browser_lab.campaign_id)
    links = page.locator('a[href^="#exp-"]')
    targets = {links.nth(i).get_attribute("href") for i in range(links.count())}
    assert targets == {f"#{e.id}" for e in experiments}
    for target in sorted(t for t in targets if t):
        expect(page.locator(f'[id="{target[1:]}"]')).to_have_count(1)
    first = sorted(t for t in targets if t)[0]
    page.locator(f'a[href="{first}"]').first.click()
    expect(page).to_have_url(re.compile(f"{re.escape(first)}$"))
    assert seen == [browser_lab.report.as_uri()]


def test_every_in_page_link_of_the_report_resolves(page: Page, browser_lab: BrowserLab) -> None:
    open_report(page, browser_lab.report)
    hrefs = page.eval_on_selector_all("a[href^='#']", "els => els.map(e => e.getAttribute('href'))")
    dead = sorted({h for h in hrefs if page.locator(f'[id="{h[1:]}"]').count() == 0})
    assert not dead, f"links to nothing in the report: {dead}"
