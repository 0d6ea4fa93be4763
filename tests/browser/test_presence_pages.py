"""Presence on the pages, in headless Chromium, against two real server nodes on one Redis: the watch and
play pages show a dot per seat (filled while the seat has a connection open, on any node) and how many
spectators watch; the list of games shows the seats' dots too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from orchestra_client import GameClient
from tests.support.browser import new_game, screenshot
from tests.support.servers import ServerProcess

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

# Each score row's seat and whether its presence dot is filled.
ONLINE_JS = """() => Object.fromEntries([...document.querySelectorAll('#scores tbody tr')].map(
    (row) => [row.dataset.seat, row.querySelector('.presence')?.dataset.online ?? null]))"""


async def shows(page: Any, online: dict[str, str], watching: str, timeout: float = 15.0) -> None:
    """Wait until the page's seats show `online` and its header `watching` spectators."""
    await page.wait_for_function(
        """([online, watching]) => {
            const rows = [...document.querySelectorAll('#scores tbody tr')];
            const shown = Object.fromEntries(
                rows.map((row) => [row.dataset.seat, row.querySelector('.presence')?.dataset.online]));
            return JSON.stringify(shown) === JSON.stringify(online)
                && document.querySelector('#watching')?.dataset.count === watching
                && !document.querySelector('#watching').hidden;
        }""",
        arg=[online, watching],
        timeout=timeout * 1000,
    )


async def test_the_watch_and_play_pages_show_who_is_at_the_table_on_every_node(
    start_server: Callable[..., ServerProcess], page: Any, browser: Any
) -> None:
    first, second = start_server(), start_server()
    game_id, tokens = await new_game(first.url, ["Ada", "Ben", "Cy"])
    await page.goto(f"{second.url}/games/{game_id}/watch")
    await page.wait_for_selector('#status[data-status="live"]')
    await shows(page, {"0": "false", "1": "false", "2": "false"}, "1")  # the page itself watches
    async with await GameClient.connect(first.url, game_id, tokens[0], reconnect=False):
        await shows(page, {"0": "true", "1": "false", "2": "false"}, "1")
        # Ben plays in a page of his own, on the first node; Ada's client and a spectator stay.
        context = await browser.new_context(viewport={"width": 1400, "height": 900})
        try:
            ben = await context.new_page()
            await ben.goto(f"{first.url}/games/{game_id}/play#token={tokens[1]}")
            async with await GameClient.connect(first.url, game_id, reconnect=False):
                await shows(page, {"0": "true", "1": "true", "2": "false"}, "2")
                await shows(ben, {"0": "true", "1": "true", "2": "false"}, "2")
                assert await page.locator("#watching").inner_text() == "2 spectators"
                await screenshot(page, "watch-presence")
            await shows(ben, {"0": "true", "1": "true", "2": "false"}, "1")
            await page.goto(f"{second.url}/")
            await page.wait_for_selector("body[data-ready='true']")
            await page.wait_for_function(
                """(id) => [...document.querySelectorAll(`tr[data-game="${id}"] .presence`)]
                    .map((dot) => dot.dataset.online).join() === 'true,true,false'""",
                arg=game_id,
                timeout=15000,
            )
        finally:
            await context.close()
    # Ada's client gone and Ben's page closed: the watch page, open again, shows every seat empty.
    await page.goto(f"{second.url}/games/{game_id}/watch")
    await shows(page, {"0": "false", "1": "false", "2": "false"}, "1")
    assert await page.evaluate(ONLINE_JS) == {"0": "false", "1": "false", "2": "false"}
