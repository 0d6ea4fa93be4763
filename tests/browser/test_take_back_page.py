"""Taking back a placement on the pages, in headless Chromium, against a real server: the play page offers
"Take back" exactly while the seat's placement is the game's last event, the board and a watcher's board
follow it (the token leaves), the logs say who took what back, and the replay page steps over it."""

from __future__ import annotations

from typing import Any

import pytest

from orchestra_client import GameClient, get_events, get_view
from tests.support.browser import BELOW_JS, CHAIRS_JS, new_game, screenshot, wait_for_board
from tests.support.servers import ServerProcess

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

PERF = {"kind": "performance", "era": "classical"}
# Records, in a page, each token drawn leaving its space: [space, seat, title].
RECORD_LEAVING_JS = """() => {
  window.leaving = [];
  new MutationObserver((changes) => {
    for (const change of changes) for (const node of change.addedNodes) {
      if (node.classList?.contains('leaving')) {
        window.leaving.push([node.closest('[data-space]').dataset.space, node.dataset.seat, node.title]);
      }
    }
  }).observe(document.querySelector('#board'), {subtree: true, childList: true});
}"""
OFFERED_JS = "() => !document.querySelector('#take-back').hidden"


async def offered(page: Any, shown: bool) -> None:
    """Wait until the play page shows (or hides) its "Take back" button."""
    await page.wait_for_function(
        f"() => document.querySelector('#take-back').hidden === {'false' if shown else 'true'}",
        timeout=10_000,
    )


async def log_text(page: Any, version: int) -> str:
    text: str = await page.locator(f'#log li[data-version="{version}"] .text').inner_text()
    return text


async def place_on_page(page: Any, kind: str, which: str, space: str) -> None:
    await page.select_option("#kind", kind)
    await page.select_option("#which", which)
    await page.wait_for_function(
        "(space) => document.querySelector(`[data-space=\"${space}\"]`).dataset.legal === 'true'", arg=space
    )
    await page.click(f'[data-space="{space}"]')


async def test_the_play_page_takes_back_a_placement_and_every_board_follows(
    server: ServerProcess, page: Any
) -> None:
    game_id, tokens = await new_game(server.url, ["Ada", "Ben"])
    watch = await page.context.new_page()
    errors: list[str] = []
    watch.on("pageerror", lambda error: errors.append(str(error)))
    await watch.goto(f"{server.url}/games/{game_id}/watch")
    await page.goto(f"{server.url}/games/{game_id}/play#token={tokens[0]}")
    for opened in (page, watch):
        await opened.wait_for_selector('#status[data-status="live"]')
    await watch.evaluate(RECORD_LEAVING_JS)
    assert not await page.evaluate(OFFERED_JS), "nothing placed: nothing to take back"

    async with await GameClient.connect(server.url, game_id, tokens[1]) as ben:
        assert (await ben.place(PERF, "viola"))["type"] == "accepted"
        await wait_for_board(page, await get_view(server.url, game_id))
        assert not await page.evaluate(OFFERED_JS), "Ben's placement is not Ada's to take back"
        before = await get_view(server.url, game_id)

        # Ada's Strings repair goes below the line in the Viola (Ben holds its chair): offered at once.
        await place_on_page(page, "repair", "strings", "viola")
        await offered(page, True)
        placed = await get_view(server.url, game_id)
        assert [s["seat"] for s in placed["spaces"]["viola"]["below"]] == [0]
        for opened in (page, watch):
            await wait_for_board(opened, placed)
        button = page.locator("#take-back")
        assert await button.get_attribute("title") == "Take back a Strings repair from Viola"
        await screenshot(page, "play-take-back")

        await button.click()
        await offered(page, False)
        after = await get_view(server.url, game_id)
        assert after["version"] == placed["version"] + 1
        assert after == {**before, "version": after["version"]}, "the game is as it was before"
        for opened in (page, watch):
            await wait_for_board(opened, after)
            assert await opened.locator("#board").get_attribute("data-version") == str(after["version"])
            assert "Ada takes back a Strings repair from Viola" in await log_text(opened, after["version"])
        leaving = [["viola", "0", "Ada: a Strings repair (taken back)"]]
        assert await watch.evaluate("window.leaving") == leaving, "the watcher saw the token leave"
        events = await get_events(server.url, game_id)
        assert events[-1]["event"] == {"type": "PlacementTakenBack", "seat": 0, "version": placed["version"]}
        await screenshot(watch, "watch-take-back")

        # Placed again, then Ben places: the offer goes with any later envelope.
        await place_on_page(page, "repair", "strings", "viola")
        await offered(page, True)
        assert (await ben.place({"kind": "repair", "family": "winds"}, "oboe"))["type"] == "accepted"
        await offered(page, False)

        # Opened afresh, the page reads the history: offered when its seat's placement is the last event.
        await place_on_page(page, "performance", "classical", "clarinet")
        await offered(page, True)
        await page.reload()
        await page.wait_for_selector('#status[data-status="live"]')
        await offered(page, True)
        # Ben cannot take back Ada's placement; the server says so and nothing changes.
        answer = await ben.take_back()
        assert answer["type"] == "rejected" and answer["code"] == "cannot_take_back"
        assert await page.evaluate(OFFERED_JS)
        await page.click("#take-back")
        await offered(page, False)
        final = await get_view(server.url, game_id)
        for opened in (page, watch):
            await wait_for_board(opened, final)
    shown = {"chairs": await page.evaluate(CHAIRS_JS), "below": await page.evaluate(BELOW_JS)}
    assert shown == {"chairs": await watch.evaluate(CHAIRS_JS), "below": await watch.evaluate(BELOW_JS)}
    assert not errors, f"script errors in the watch page: {errors}"


async def test_the_replay_page_steps_over_a_take_back(server: ServerProcess, page: Any) -> None:
    game_id, tokens = await new_game(server.url, ["Ada", "Ben"])
    async with await GameClient.connect(server.url, game_id, tokens[0]) as ada:
        assert (await ada.place(PERF, "viola"))["type"] == "accepted"
        assert (await ada.place(PERF, "viola"))["type"] == "accepted"  # below the line: her own chair
        back = await ada.take_back()
        assert back["type"] == "accepted" and back["version"] == 4
    await page.goto(f"{server.url}/games/{game_id}/replay?at=3")
    await page.wait_for_selector('#board[data-version="3"]')
    await wait_for_board(page, await get_view(server.url, game_id, at=3))
    await page.evaluate(RECORD_LEAVING_JS)
    await page.click("#next")
    await page.wait_for_selector('#board[data-version="4"]')
    at_4 = await get_view(server.url, game_id, at=4)
    await wait_for_board(page, at_4)
    assert at_4 == {**await get_view(server.url, game_id, at=2), "version": 4}
    leaving = [["viola", "0", "Ada: a Classical performance (taken back)"]]
    assert await page.evaluate("window.leaving") == leaving
    assert "Ada takes back a Classical performance from Viola" in await log_text(page, 4)
    assert "takes back" in await page.locator("#current").inner_text()
