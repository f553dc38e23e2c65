"""Fixtures for the dashboard's browser tests: a lab with a finished campaign, the dashboard
serving it on 127.0.0.1, and headless Chromium driven by Playwright.

Everything here is built once per module and only when a test asks for it, so the other web
tests (pure functions) pay nothing. Playwright is imported inside the fixtures: the browser
test module skips itself when it or Chromium is missing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.cli.helpers import explain, rsilab
from tests.web.serving import serve

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, Page, Request

    from rsilab.store import Lab

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class BrowserLab:
    """A lab with one finished campaign, and what the tests need to reach it."""

    path: Path
    key_dir: Path
    campaign_id: str
    report: Path
    """``rsilab report latest --html`` of the campaign, written right after it ran."""


@dataclass
class Dashboard:
    """The dashboard served over a :class:`BrowserLab`."""

    lab: BrowserLab
    base: str
    """``http://127.0.0.1:PORT`` (no trailing slash)."""

    def url(self, path: str) -> str:
        return self.base + path


@dataclass
class Traffic:
    """Every request the browser context made, and every script error of its pages."""

    requests: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)

    def record(self, request: Request) -> None:
        self.requests.append(request.url)


@pytest.fixture(scope="module")
def browser_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserLab]:
    """``rsilab init``, ``rsilab run synthetic --budget experiments=6 --seed 2`` and its HTML
    report, once per module.

    The lab's key lives in a folder of the module's own (the suite's autouse fixture gives
    each test a fresh key folder, so tests that write must point back here: see
    ``lab_env`` in the browser tests).
    """
    root = tmp_path_factory.mktemp("browser-lab")
    lab = BrowserLab(
        path=root / "lab", key_dir=root / "keys", campaign_id="", report=root / "report.html"
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RSILAB_KEY_DIR", str(lab.key_dir))
        mp.setenv("RSILAB_SANDBOX", "process")
        mp.delenv("RSILAB_LAB", raising=False)
        made = rsilab("init", "--lab", lab.path)
        assert made.exit_code == 0, explain(made)
        # a fixed seed: the campaign's search and its proposal decision follow it (seed 2
        # proposes a candidate, which the lineage page shows)
        ran = rsilab(
            "run", "synthetic", "--budget", "experiments=6", "--seed", "2", "--lab", lab.path
        )
        assert ran.exit_code == 0, explain(ran)
        # Now, while "latest" is this campaign: tests add other campaigns to the lab.
        wrote = rsilab("report", "latest", "--html", lab.report, "--lab", lab.path)
        assert wrote.exit_code == 0, explain(wrote)
        from rsilab.records import Campaign
        from rsilab.store import Lab

        with Lab.open(lab.path) as opened:
            (campaign,) = opened.store.query_as(Campaign)
        lab.campaign_id = campaign.id
        yield lab


@pytest.fixture
def lab_env(
    browser_lab: BrowserLab, isolated_environment: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Point the ledger key back at the module's lab (the suite gives each test a fresh one):
    browser test modules use it for every test."""
    monkeypatch.setenv("RSILAB_KEY_DIR", str(browser_lab.key_dir))
    monkeypatch.setenv("RSILAB_SANDBOX", "process")


@pytest.fixture
def store(browser_lab: BrowserLab) -> Iterator[Lab]:
    """The lab opened by the test itself, to check pages against its records."""
    from rsilab.store import Lab

    with Lab.open(browser_lab.path) as opened:
        yield opened


@pytest.fixture(scope="module")
def dashboard(browser_lab: BrowserLab) -> Iterator[Dashboard]:
    """The dashboard app under uvicorn in a daemon thread, on a free port of 127.0.0.1."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RSILAB_KEY_DIR", str(browser_lab.key_dir))
        with serve(browser_lab.path) as served:
            yield Dashboard(lab=browser_lab, base=served.base)


@pytest.fixture(scope="module")
def traffic() -> Traffic:
    """What the module's browser context requested (filled by ``browser``)."""
    return Traffic()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory, traffic: Traffic) -> Iterator[BrowserContext]:
    """Headless Chromium with a fresh profile; every request it makes goes to ``traffic``."""
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1280, "height": 900},
        )
        context.on("request", traffic.record)
        context.on(
            "page", lambda p: p.on("pageerror", lambda e: traffic.page_errors.append(str(e)))
        )
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def page(browser: BrowserContext) -> Iterator[Page]:
    """A fresh tab, closed after the test."""
    tab = browser.new_page()
    tab.set_default_timeout(10_000)
    try:
        yield tab
    finally:
        tab.close()


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    """Where screenshots go: $RSILAB_TEST_ARTIFACTS, else .test-artifacts/screenshots."""
    folder = Path(
        os.environ.get("RSILAB_TEST_ARTIFACTS") or REPO_ROOT / ".test-artifacts" / "screenshots"
    )
    folder.mkdir(parents=True, exist_ok=True)
    return folder
