"""clients/js/README.md's browser example, as written, in headless Chromium on a live server's origin."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.js.conftest import CLIENT
from tests.support.servers import ServerProcess

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.browser]


def _example() -> str:
    readme = (CLIENT / "README.md").read_text()
    found = re.search(r"^## In a browser\n.*?^```html\n(.*?)^```", readme, re.MULTILINE | re.DOTALL)
    assert found is not None, "the README's browser section has no html example"
    return found.group(1)


async def test_the_readme_browser_example_plays_from_the_servers_own_module(
    server: ServerProcess, browser: Any
) -> None:
    example = _example()
    assert 'from "/client/orchestra.js"' in example
    page = await browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    # The example becomes a document of the server's origin, as a page of one's own served there
    # would be: its import and its calls are same-origin, and all it loads comes from the server.
    await page.goto(f"{server.url}/readyz")
    await page.set_content(f"<!doctype html>\n{example}")
    await page.wait_for_function("() => document.body.textContent.includes('\"prestige\":3')", timeout=15_000)
    scores = await page.evaluate("JSON.parse(document.body.textContent)")
    assert not errors, errors
    assert scores == [{"seat": 0, "chairs": ["viola"], "prestige": 3, "resources": {"money": 4}}]
