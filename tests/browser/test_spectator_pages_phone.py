"""The watch and replay pages on a phone: nothing scrolls sideways, every control is a finger's size."""

from __future__ import annotations

from typing import Any

import pytest

from orchestra_client import get_view
from tests.browser.phone import check_fits_phone, new_phone
from tests.support.browser import new_game, play_bots, screenshot, wait_for_board
from tests.support.servers import ServerProcess

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


async def test_the_watch_and_replay_pages_fit_a_phone_with_44_px_controls(
    server: ServerProcess, browser: Any
) -> None:
    game_id, tokens = await new_game(server.url, ["Ada", "Élodie", "Bartholomew-Maximilian"])
    await play_bots(server.url, game_id, tokens, placements=8, seed=5)
    errors: list[str] = []
    page = await new_phone(browser, errors)
    view = await get_view(server.url, game_id)
    for page_name in ("watch", "replay"):
        await page.goto(f"{server.url}/games/{game_id}/{page_name}")
        await wait_for_board(page, view)
        await check_fits_phone(page)
        await screenshot(page, f"{page_name}-phone")
    assert errors == []
