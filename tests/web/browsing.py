"""What the browser tests share: opening a dashboard page, screenshots, finding rows, and
the check that no text of a page is cut without its full text in a title."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

    from tests.web.conftest import Dashboard

WAIT_MS = 10_000
"""How long a page may take to show what a test waits for (the live poll is every 2 s)."""

FULL_PAGE_MAX_PX = 6000
"""Taller pages (the one-file report, long comparisons) are shot as the window shows them:
encoding a 17,000-pixel PNG costs seconds and shows nothing a test reads."""


def snap(page: Page, folder: Path, name: str) -> None:
    """A screenshot of what the browser shows now: the whole page unless it is very tall."""
    tall = int(page.evaluate("document.documentElement.scrollHeight")) > FULL_PAGE_MAX_PX
    page.screenshot(path=str(folder / f"{name}.png"), full_page=not tall)


def open_page(page: Page, dash: Dashboard, path: str) -> None:
    response = page.goto(dash.url(path))
    assert response is not None and response.status == 200, f"GET {path}"


def row_of(page: Page, link_text: str, within: str = "main") -> Locator:
    """The table rows (under ``within``) holding a link whose text is exactly ``link_text``."""
    return page.locator(f"{within} tr", has=page.locator(f'a:text-is("{link_text}")'))


_CUT_TEXT = """() => {
  // Every cell, heading and label whose text overflows its box, unless it (or an element
  // inside it) carries the full text in a title attribute.
  const out = [];
  for (const el of document.querySelectorAll('main td, main th, main h1, main h2, main dd')) {
    if (el.scrollWidth <= el.clientWidth + 1) continue;
    const titled = [el, ...el.querySelectorAll('[title]')].some(
      t => t.getAttribute('title') && t.getAttribute('title').length >= t.textContent.length - 1);
    if (!titled) out.push(el.tagName + ': ' + el.textContent.slice(0, 80));
  }
  return out;
}"""


def cut_texts(page: Page) -> list[str]:
    """The texts of the page's main part that are cut off with no title holding them whole."""
    found: list[str] = page.evaluate(_CUT_TEXT)
    return found
