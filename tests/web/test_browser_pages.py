"""The dashboard judged in a browser: what a reader sees on each page, checked in headless
Chromium against the lab's records, with a screenshot of every page visited.

Each test states what the page must show (an element present, text not cut, axis labels
whole numbers, one time unit per axis, every direction connected, no column repeated), not a
pixel snapshot.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from rsilab.records import (
    Campaign,
    Candidate,
    Direction,
    EventDraft,
    Experiment,
    MetricSource,
    Role,
)
from rsilab.store import Lab
from tests.cli.helpers import explain, rsilab
from tests.web.baseline_jobs import record_baseline_jobs
from tests.web.browsing import WAIT_MS, cut_texts, open_page, snap
from tests.web.conftest import CHROMIUM
from tests.web.serving import serve

_SETUP = "`make browser-deps` installs Debian's chromium with apt-get; `make install` playwright"
if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} is missing ({_SETUP})", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason=f"playwright is not installed ({_SETUP})")

from playwright.sync_api import Page, expect  # noqa: E402

if TYPE_CHECKING:
    from tests.web.conftest import Dashboard

pytestmark = pytest.mark.usefixtures("lab_env")


def x_ticks(chart_locator: object) -> list[str]:
    from playwright.sync_api import Locator

    assert isinstance(chart_locator, Locator)
    return [t.strip() for t in chart_locator.locator("text.x-tick").all_text_contents()]


# -- charts ----------------------------------------------------------------------------------


def test_count_axes_tick_whole_numbers_and_time_axes_one_unit(
    page: Page, dashboard: Dashboard, artifacts_dir: Path
) -> None:
    open_page(page, dashboard, f"/campaigns/{dashboard.lab.campaign_id}")
    page.locator("#curves").scroll_into_view_if_needed()
    snap(page, artifacts_dir, "charts")
    curves = page.locator("#curves div.curve")
    assert curves.count() >= 1
    for i in range(curves.count()):
        by_experiment, by_time = curves.nth(i).locator("svg.chart").all()
        counts = x_ticks(by_experiment)
        assert counts, "the experiments axis has no ticks"
        assert all(re.fullmatch(r"[1-9]\d*", label) for label in counts), counts
        assert len(set(counts)) == len(counts), f"repeated tick labels: {counts}"
        times = x_ticks(by_time)
        units = {label.split(" ")[-1] for label in times}
        assert len(units) == 1 and units <= {"s", "min", "h", "d"}, times


# -- the research DAG ------------------------------------------------------------------------


def test_the_dag_has_a_legend_full_titles_and_no_unconnected_direction(
    page: Page, dashboard: Dashboard, store: Lab, artifacts_dir: Path
) -> None:
    cid = dashboard.lab.campaign_id
    directions = store.store.query_as(Direction, campaign_id=cid)
    open_page(page, dashboard, f"/campaigns/{cid}")
    page.locator("#dag").scroll_into_view_if_needed()
    snap(page, artifacts_dir, "dag")

    legend = page.locator("#dag .dag-legend")
    expect(legend).to_be_visible()
    for state in ("open", "promising", "supported", "refuted", "exhausted"):
        expect(legend.locator(f'.legend-state[data-state="{state}"] .swatch')).to_have_count(1)
    verify = legend.locator('.legend-edge[data-relation="verify"] path')
    assert (verify.get_attribute("stroke-dasharray") or "") != ""  # dashed, as drawn
    expect(legend.locator('.legend-edge[data-relation="continue"]')).to_have_count(1)

    edges = page.locator("svg.dag path.dag-edge")
    ends = [
        (e.get_attribute("data-from"), e.get_attribute("data-to"), e.get_attribute("data-relation"))
        for e in edges.all()
    ]
    targets = {to for _, to, _ in ends}
    assert {d.id for d in directions} <= targets, "a direction is drawn with no edge into it"
    for d in directions:  # every relation the records hold is drawn
        for p in d.parents:
            assert (p.parent_id, d.id, str(p.relation)) in ends
    for relation in {r for _, _, r in ends}:  # and every relation drawn is in the legend
        expect(legend.locator(f'.legend-edge[data-relation="{relation}"]')).to_have_count(1)
    expect(page.locator("svg.dag a.dag-start")).to_have_count(1)

    for d in directions:
        node = page.locator(f'svg.dag a.dag-node[data-direction-id="{d.id}"]')
        expect(node.locator("title")).to_have_text(re.compile(re.escape(d.title)))
        shown = " ".join(node.locator("tspan").all_text_contents())
        assert shown == d.title or shown.endswith("\u2026"), shown  # wrapped, not cut
    rows = page.locator("#dag table.directions tbody tr")
    expect(rows).to_have_count(len(directions))
    assert cut_texts(page) == []


# -- text that does not fit ------------------------------------------------------------------


@pytest.mark.parametrize("where", ["", "/experiments", "/lineage", "/flags", "/resources"])
def test_no_text_is_cut_without_its_full_text_on_hover(
    page: Page, dashboard: Dashboard, artifacts_dir: Path, where: str
) -> None:
    page.set_viewport_size({"width": 1024, "height": 800})  # narrower than the main width
    open_page(page, dashboard, f"/campaigns/{dashboard.lab.campaign_id}{where}")
    snap(page, artifacts_dir, f"narrow{where.replace('/', '-') or '-overview'}")
    assert cut_texts(page) == []


def test_a_long_description_is_cut_with_its_full_text_in_a_title(
    page: Page, dashboard: Dashboard, store: Lab
) -> None:
    cid = dashboard.lab.campaign_id
    long = [
        e for e in store.store.query_as(Experiment, campaign_id=cid) if len(e.description) > 120
    ]
    assert long, "no experiment of the campaign has a description longer than the column"
    open_page(page, dashboard, f"/campaigns/{cid}/experiments")
    titled = dict(
        page.eval_on_selector_all(
            "main table.experiments span[title]",
            "els => els.map(e => [e.getAttribute('title'), e.textContent])",
        )
    )
    for e in long:
        assert e.description in titled
        shown = titled[e.description]
        assert shown.endswith("\u2026") and e.description.startswith(shown[:-1])


# -- lineage ---------------------------------------------------------------------------------


def test_the_lineage_shows_each_verdict_once(
    page: Page, dashboard: Dashboard, store: Lab, artifacts_dir: Path
) -> None:
    cid = dashboard.lab.campaign_id
    judged = [c for c in store.store.query_as(Candidate, campaign_id=cid) if c.decisions]
    assert judged and all("gain" in c.reason for c in judged)  # the record repeats them
    open_page(page, dashboard, f"/campaigns/{cid}/lineage")
    snap(page, artifacts_dir, "lineage-once")
    for c in judged:
        row = page.locator("#decisions tbody tr", has=page.locator(f'td:text-is("{c.id}")'))
        cells = row.locator("td")
        verdicts, reason = cells.nth(6).inner_text(), cells.nth(7).inner_text()
        for d in c.decisions:
            assert f"{d.benchmark}" in verdicts and f"{d.gain:+.4f}" in verdicts
            assert f"{d.gain:+.4f}" not in reason, reason
        assert reason.split(" (")[0] == c.reason.split(" (")[0]  # accepted / rejected
        assert "paired seeds" in reason
    versions = page.locator("main section", has=page.locator('h2:text-is("Versions")'))
    assert "gain" not in versions.inner_text()


# -- compare ---------------------------------------------------------------------------------


def _best_other(store: Lab, cid: str) -> tuple[str, str]:
    """The campaign's first experiment and the other one with the best last controller dev
    score on quality (synthetic's target; higher is better)."""
    experiments = sorted(
        store.store.query_as(Experiment, campaign_id=cid), key=lambda e: (e.created_at, e.id)
    )
    scored = []
    for e in experiments[1:]:
        values = [
            m for m in e.metrics if m.name == "quality" and m.source is MetricSource.CONTROLLER
        ]
        if values:
            scored.append((values[-1].value, e.id))
    best = max(scored, key=lambda s: s[0])[1]
    return experiments[0].id, best


def test_compare_defaults_to_the_reference_against_the_best_a_page_at_a_time(
    page: Page, dashboard: Dashboard, store: Lab, artifacts_dir: Path
) -> None:
    cid = dashboard.lab.campaign_id
    reference, best = _best_other(store, cid)
    assert reference != best
    open_page(page, dashboard, f"/campaigns/{cid}/compare")
    snap(page, artifacts_dir, "compare-default")
    expect(page.locator("main h1").last).to_have_text(f"Compare {reference} (a) with {best} (b)")
    expect(page.locator("#compare-default")).to_contain_text(reference)

    table = page.locator("main table.samples").first
    section = page.locator("main section.samples-of").first
    count_text = section.locator('dt:text-is("samples") + dd').inner_text()
    total = int(count_text.split(":")[0])
    assert total > 25, "the synthetic dev tier should hold more than one page of samples"
    expect(table.locator("tbody tr")).to_have_count(25)
    first = _differences(table)
    assert first == sorted(first, key=abs, reverse=True)
    assert [int(r) for r in table.locator("tbody tr td:first-child").all_text_contents()] == list(
        range(1, 26)
    )
    section.locator('a.pager:text-is("next samples")').click()
    expect(page).to_have_url(re.compile(r"page=2"))
    table = page.locator("main table.samples").first
    ranks = [int(r) for r in table.locator("tbody tr td:first-child").all_text_contents()]
    assert ranks[0] == 26 and len(ranks) == min(25, total - 25)
    second = _differences(table)
    assert max(abs(x) for x in second) <= min(abs(x) for x in first) + 1e-9
    snap(page, artifacts_dir, "compare-page-2")


def _differences(table: object) -> list[float]:
    from playwright.sync_api import Locator

    assert isinstance(table, Locator)
    return [float(x) for x in table.locator("tbody tr td:last-child").all_text_contents()]


# -- workspace diff --------------------------------------------------------------------------


def test_the_workspace_diff_leaves_out_caches_and_reformatted_configs(
    page: Page, dashboard: Dashboard, store: Lab, artifacts_dir: Path, tmp_path: Path
) -> None:
    """An experiment whose snapshot holds bytecode, a cache folder and its parent's config
    only reformatted, plus one real change: the diff names the change alone."""
    cid = dashboard.lab.campaign_id
    parent = next(
        e for e in store.store.query_as(Experiment, campaign_id=cid) if e.workspace_hash is not None
    )
    tree = tmp_path / "workspace"
    store.artifacts.materialize(str(parent.workspace_hash), tree, "tree")
    before = (tree / "config.json").read_text()
    after = json.dumps(json.loads(before), indent=4) + "\n"
    assert after != before  # the same settings, written differently
    (tree / "config.json").write_text(after)
    (tree / "__pycache__").mkdir(exist_ok=True)
    (tree / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"\x00bytecode")
    (tree / "notes.md").write_text("tried a wider net\n")
    snapshot = store.artifacts.put_tree(tree).sha256
    child = Experiment(
        campaign_id=cid,
        direction_id=parent.direction_id,
        parent_experiment_id=parent.id,
        description="a snapshot with caches and a reformatted config",
        workspace_hash=snapshot,
        created_by="browser test",
    )
    store.store.commit(
        EventDraft(
            actor="browser test",
            role=str(Role.HUMAN),
            action="experiment_created",
            campaign_id=cid,
            detail=child.summary(),
        ),
        [child],
    )
    open_page(page, dashboard, f"/campaigns/{cid}/experiments/{child.id}")
    diff = page.locator("main section", has=page.locator('h2:text-is("Workspace diff")'))
    diff.scroll_into_view_if_needed()
    snap(page, artifacts_dir, "workspace-diff")
    expect(diff.locator("h3")).to_have_text(["notes.md (added)"])
    expect(diff).to_contain_text("1 file differs; 1 cache and bytecode file left out")
    expect(diff).to_contain_text("only reformatted, the same settings: config.json")


# -- the baseline's progress -----------------------------------------------------------------


def test_a_campaign_waiting_for_its_baseline_shows_seed_k_of_n(
    page: Page, tmp_path: Path, artifacts_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RSILAB_KEY_DIR", str(tmp_path / "keys"))
    lab = tmp_path / "lab"
    assert rsilab("init", "--lab", lab).exit_code == 0
    made = rsilab("campaign", "new", "synthetic", "--lab", lab)
    assert made.exit_code == 0, explain(made)
    cid = made.stdout.strip()
    with Lab.open(lab) as opened:
        record_baseline_jobs(opened.store, started=6, finished=2)
    with serve(lab) as served:
        response = page.goto(f"{served.base}/campaigns/{cid}")
        assert response is not None and response.ok
        progress = page.locator("#baseline-progress")
        expect(progress).to_have_text(re.compile(r"^Baseline: seed 3 of 6 \(2 finished\)"))
        expect(progress.locator("progress")).to_have_attribute("value", "2")
        snap(page, artifacts_dir, "baseline-progress")
        page.evaluate("window.__notReloaded = true")
        with Lab.open(lab) as opened:  # two more seeds finish: the page follows
            record_baseline_jobs(opened.store, started=2, finished=2)
        expect(progress).to_have_text(re.compile(r"seed 5 of 8 \(4 finished\)"), timeout=WAIT_MS)
        assert page.evaluate("window.__notReloaded === true")
        with Lab.open(lab) as opened:
            assert not opened.store.get_as(cid, Campaign).is_finished()
