"""The New game form and the open tables on `/`, in headless Chromium against a real server, with what
they refuse said in words: a name the table has, a join to a full table, a join to a game that is not
open, a host page without its game's host token, and a server that needs its API key."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.browser.phone import check_fits_phone, new_phone
from tests.support.browser import screenshot
from tests.support.servers import ServerProcess

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

WAIT = 20_000
API_KEY = "a-key-long-enough-for-the-server"


async def create_with_form(page: Any, url: str, names: list[str], *, open_table: bool) -> str:
    """Make a game through the New game form (an empty name: an open seat); its id, from the host page."""
    await page.goto(f"{url}/")
    await page.select_option("#seat-count", str(len(names)))
    for seat, name in enumerate(names):
        await page.fill(f"#seat-{seat}", name)
    if open_table:
        await page.check("#open-table")
    await page.click("#create")
    await page.wait_for_url("**/host#token=*", timeout=WAIT)
    return str(page.url.split("/games/")[1].split("/")[0])


async def refused(page: Any, box: str, code: str) -> str:
    """Wait until the page says in `box` why the server refused (`code`); the words."""
    await page.wait_for_selector(f'{box}[data-code="{code}"]', timeout=WAIT)
    return str(await page.locator(box).inner_text())


async def test_an_open_table_is_joined_from_the_list_and_refusals_are_said_in_words(
    start_server: Callable[..., ServerProcess], browser: Any
) -> None:
    server = start_server()
    errors: list[str] = []
    host, ben, late = [await new_phone(browser, errors) for _ in range(3)]
    # A late phone whose list was read before the table filled up: its refresh timer never fires.
    await late.clock.install()
    game_id = await create_with_form(host, server.url, ["Ada", ""], open_table=True)
    await check_fits_phone(host)
    await screenshot(host, "table-host-open-phone")
    for phone in (ben, late):
        await phone.goto(f"{server.url}/")
        await phone.locator(f'.open-table[data-game="{game_id}"]').wait_for(timeout=WAIT)
    await check_fits_phone(ben)
    await screenshot(ben, "table-index-phone")
    table = ben.locator(f'.open-table[data-game="{game_id}"]')
    assert "1 seat free" in await table.inner_text()
    # A name the table has (in another case) is refused, and nothing is taken.
    await table.locator("input").fill("ADA")
    await table.locator("button").click()
    words = await refused(ben, "#join-message", "bad_request")
    assert "could not take that" in words
    async with httpx.AsyncClient(base_url=server.url) as http:
        view = (await http.get(f"/games/{game_id}")).json()
    assert [player["name"] for player in view["players"]] == ["Ada", None]
    await table.locator("input").fill("Ben")
    await table.locator("button").click()
    await ben.wait_for_url(f"**/games/{game_id}/play#token=*", timeout=WAIT)
    await ben.wait_for_selector('#status[data-status="live"]', timeout=WAIT)
    assert await ben.locator("#me").inner_text() == "You are Ben"
    assert await ben.locator("#take-seat").is_hidden()
    await host.locator('.seat-card[data-seat="1"] .name', has_text="Ben").wait_for(timeout=WAIT)
    # The late phone's Join: the table has no open seat left.
    stale = late.locator(f'.open-table[data-game="{game_id}"]')
    await stale.locator("input").fill("Cy")
    await stale.locator("button").click()
    assert "no open seat" in await refused(late, "#join-message", "no_open_seat")
    # The list, read again, no longer shows the full table.
    await late.reload()
    await late.wait_for_selector("body[data-ready='true']", timeout=WAIT)
    assert await late.locator(f'.open-table[data-game="{game_id}"]').count() == 0
    assert not errors, errors


async def test_a_join_to_a_game_that_is_not_open_and_a_host_page_without_its_token_are_refused(
    start_server: Callable[..., ServerProcess], browser: Any
) -> None:
    server = start_server()
    errors: list[str] = []
    phone = await new_phone(browser, errors)
    async with httpx.AsyncClient(base_url=server.url) as http:
        closed = (await http.post("/games", json={"players": ["Ada", None]})).json()
        other = (await http.post("/games", json={"players": ["Bo"]})).json()

    # A list that names the game as an open table (as a stale or forged one might): the server refuses.
    async def listed_as_open(route: Any) -> None:
        answer = await route.fetch()
        tables = await answer.json()
        listed = {"game_id": closed["game_id"], "players": ["Ada", None], "open_seats": [1], "version": 1}
        tables.append(listed)
        await route.fulfill(response=answer, body=json.dumps(tables))

    await phone.route(f"{server.url}/games/open", listed_as_open)
    await phone.goto(f"{server.url}/")
    table = phone.locator(f'.open-table[data-game="{closed["game_id"]}"]')
    await table.wait_for(timeout=WAIT)
    await table.locator("input").fill("Ben")
    await table.locator("button").click()
    assert "Not allowed" in await refused(phone, "#join-message", "forbidden")
    async with httpx.AsyncClient(base_url=server.url) as http:
        view = (await http.get(f"/games/{closed['game_id']}")).json()
    assert [player["name"] for player in view["players"]] == ["Ada", None]
    # The host page with another game's host token: the page says it was refused, and shows no link.
    await phone.goto(f"{server.url}/games/{closed['game_id']}/host#token={other['host_token']}")
    await phone.wait_for_selector('#status[data-status="refused"]', timeout=WAIT)
    assert "refused" in await phone.locator("#error").inner_text()
    assert await phone.locator(".seat-card:visible").count() == 0
    assert not errors, errors


async def test_a_server_that_needs_its_api_key_asks_for_it_and_the_browser_keeps_it(
    start_server: Callable[..., ServerProcess], browser: Any
) -> None:
    server = start_server(api_key=API_KEY)
    errors: list[str] = []
    phone = await new_phone(browser, errors)
    await phone.goto(f"{server.url}/")
    await phone.locator("#api-key").wait_for(state="visible", timeout=WAIT)
    await phone.fill("#seat-0", "Ada")
    await phone.fill("#api-key", "not-the-key-of-this-server")
    await phone.click("#create")
    assert "refused this API key" in await refused(phone, "#new-game-message", "forbidden")
    await check_fits_phone(phone)
    await phone.fill("#api-key", API_KEY)
    await phone.click("#create")
    await phone.wait_for_url("**/host#token=*", timeout=WAIT)
    # The key is kept in this browser, and offered again; it never travels in an address.
    await phone.goto(f"{server.url}/")
    await phone.locator("#api-key").wait_for(state="visible", timeout=WAIT)
    assert await phone.locator("#api-key").input_value() == API_KEY
    assert API_KEY not in server.logs()
    assert not errors, errors
