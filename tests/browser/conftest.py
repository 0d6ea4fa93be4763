"""Browser fixtures: headless Chromium; the servers are tests/conftest.py's `orchestra serve` processes.

Chromium is the system's (`/usr/bin/chromium`, Debian's package); Playwright drives it and never downloads
a browser. Without either, the browser tests skip with the reason (and fail under CI, see tests/conftest.py).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import SAVED, SCREENSHOTS

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def chromium_path() -> str | None:
    """The system Chromium: $ORCHESTRA_TEST_CHROMIUM, /usr/bin/chromium, or `chromium` on PATH."""
    configured = os.environ.get("ORCHESTRA_TEST_CHROMIUM")
    for candidate in (configured, "/usr/bin/chromium", shutil.which("chromium")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _missing() -> str | None:
    if importlib.util.find_spec("playwright") is None:
        return "playwright is not installed (pip install -e '.[test]')"
    if chromium_path() is None:
        return "no Chromium at /usr/bin/chromium (apt-get install chromium)"
    return None


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    """A headless Chromium for one test."""
    reason = _missing()
    if reason is not None:
        pytest.skip(reason)
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
async def page(browser: Any) -> AsyncIterator[Any]:
    """A page of 1400x900; uncaught script errors in it fail the test."""
    context = await browser.new_context(viewport={"width": 1400, "height": 900})
    opened = await context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    try:
        yield opened
    finally:
        await context.close()
    assert not errors, f"script errors in the page: {errors}"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if SAVED:
        terminalreporter.write_line(f"browser screenshots ({len(SAVED)}) saved in {SCREENSHOTS}/")
