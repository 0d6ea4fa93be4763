"""The club records' pages on a phone: standings, recent games, the search box, a player's page and chart."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from server.records.database import sqlite_records
from tests.browser.phone import PHONE, TOUCH, check_fits_phone, new_phone
from tests.records.play import play_game
from tests.records.test_projector import project
from tests.support.browser import screenshot
from tests.support.redis import RedisProcess
from tests.support.servers import ServerProcess

# A function, not an expression: Playwright evaluates a bare expression with eval() whenever it must poll,
# which the pages' Content-Security-Policy (script-src 'self') refuses.
COUNT = "([selector, n]) => document.querySelectorAll(selector).length === n"

pytestmark = pytest.mark.integration


async def test_the_records_pages_show_standings_games_and_a_players_chart_on_a_phone(
    browser: Any, own_redis: RedisProcess, start_server: Callable[..., ServerProcess]
) -> None:
    server = start_server(redis_url=own_redis.url)
    rng = random.Random(390)
    played = [await play_game(server.url, rng) for _ in range(8)]
    path = server.directory / "var" / "records.sqlite3"
    await project(own_redis.url, lambda: sqlite_records(path))
    table = httpx.get(server.url + "/records/standings").json()["standings"]
    public = [p for p in played if p.token is None]
    errors: list[str] = []
    page = await new_phone(browser, errors)

    await page.goto(server.url + "/records")
    await page.wait_for_function(COUNT, arg=["#standings li", len(table)])
    await page.wait_for_function(COUNT, arg=["#games li", len(public)])
    names = await page.eval_on_selector_all("#standings li a", "(links) => links.map((a) => a.textContent)")
    assert names == [row["name"] for row in table]
    await check_fits_phone(page)
    await screenshot(page, "records-phone")

    leader = table[0]
    await page.fill("#player", leader["name"].upper())
    await page.click("#search button")
    await page.wait_for_url("**/records/players/*")
    await page.wait_for_function(COUNT, arg=["#summary dd", 5])
    figures = await page.eval_on_selector_all("#summary dd", "(cells) => cells.map((c) => c.textContent)")
    assert figures[:2] == [str(leader["games"]), str(leader["wins"])]
    # One point of the chart per game the player took part in that is listed (their public games), once the
    # page has them all (they come after the summary).
    query = {"player": leader["name"]}
    listed = len(httpx.get(server.url + "/records/games", params=query).json()["games"])
    assert listed >= 1
    await page.wait_for_function(COUNT, arg=["#games li", listed])
    assert await page.eval_on_selector_all("#chart circle", "(dots) => dots.length") == listed
    await check_fits_phone(page)
    await screenshot(page, "records-player-phone")
    assert errors == []


def test_the_player_route_answers_json_to_a_client_and_the_page_to_a_browser(server: ServerProcess) -> None:
    assert httpx.get(server.url + "/records/players/Ada").json()["code"] == "unknown_player"
    page = httpx.get(server.url + "/records/players/Ada", headers={"accept": "text/html"})
    assert page.status_code == 200 and '<script type="module" src="/static/player.js">' in page.text


async def test_the_watch_and_replay_pages_link_to_the_records_with_a_phone_sized_target(
    browser: Any, server: ServerProcess
) -> None:
    played = await play_game(server.url, random.Random(44))
    errors: list[str] = []
    page = await new_phone(browser, errors)
    for kind in ("watch", "replay"):
        await page.goto(f"{server.url}/games/{played.game_id}/{kind}")
        link = page.locator('a[href="/records"]')
        await link.wait_for(state="visible")
        box = await link.bounding_box()
        assert box is not None
        assert box["height"] >= TOUCH - 0.5 and box["width"] >= TOUCH - 0.5, (kind, box)
        assert 0 <= box["x"] and box["x"] + box["width"] <= PHONE["width"], (kind, box)
        await screenshot(page, f"records-link-{kind}-phone")
    await link.click()
    await page.wait_for_url("**/records")
    assert errors == []
