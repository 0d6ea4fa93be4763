"""A table starts in the browser (issue 40), in headless Chromium against real server processes: a host at
desktop size makes a game with one named and two open seats through the New game form; three phones open
the links the host page's QR codes hold (decoded from its pixels by zxing-cpp), take the open seats and
play; the host gives a seat a new link (the old page is told, the new one plays); the game ends and the
next one starts, and every page follows. Then the same with two of the players on another node."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.browser.phone import check_fits_phone, decode_qrs, new_desktop, new_phone, zxing
from tests.support.browser import screenshot
from tests.support.servers import ServerProcess

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

WAIT = 20_000  # ms: pages on a loaded machine


async def seat_links(host: Any, seats: int) -> dict[int, str]:
    """Each seat's play link as the host page shows it, checked against what its QR code holds."""
    links = {}
    for seat in range(seats):
        card = host.locator(f'.seat-card[data-seat="{seat}"]')
        link = await card.locator("input.link").input_value()
        assert "/play#token=" in link
        # The code is read from the page's pixels: what a phone's camera would see.
        assert decode_qrs(await card.locator("canvas.qr").screenshot()) == [link]
        links[seat] = link
    return links


async def placed(phone: Any, timeout: int = WAIT) -> str:
    """Place the picked token in the first space the page offers; the message the page then shows."""
    before = await phone.locator("#board").get_attribute("data-version")
    await phone.locator('#board [data-legal="true"]').first.click(timeout=timeout)
    await phone.wait_for_function(
        """(before) => document.querySelector('#board').dataset.version !== before
            || document.querySelector('#message').dataset.code""",
        arg=before,
        timeout=timeout,
    )
    return str(await phone.locator("#message").inner_text())


async def take_seat(phone: Any, name: str) -> None:
    """Give the open seat's name on its play page, and wait until the page plays as that name."""
    await phone.locator("#take-seat").wait_for(state="visible", timeout=WAIT)
    await phone.fill("#seat-name", name)
    await phone.click("#take-seat-button")
    await phone.locator("#take-seat").wait_for(state="hidden", timeout=WAIT)
    assert await phone.locator("#me").inner_text() == f"You are {name}"


async def drop_seat_taken(page: Any) -> None:
    """The page's websocket loses the frames that say a seat was taken (as if still on the way)."""

    def route(ws: Any) -> None:
        server = ws.connect_to_server()
        server.on_message(lambda message: None if '"SeatTaken"' in str(message) else ws.send(message))

    await page.route_web_socket("**/ws", route)


async def play_a_table(browser: Any, first: ServerProcess, second: ServerProcess, shots: str) -> None:
    zxing()
    errors: list[str] = []
    host = await new_desktop(browser, errors)
    ada, ben, cy = [await new_phone(browser, errors) for _ in range(3)]
    # The New game form: Ada named, two seats left open.
    await host.goto(f"{first.url}/")
    await host.select_option("#seat-count", "3")
    await host.fill("#seat-0", "Ada")
    await host.click("#create")
    await host.wait_for_url("**/host#token=*", timeout=WAIT)
    game_id = host.url.split("/games/")[1].split("/")[0]
    await host.locator('.seat-card[data-seat="2"] canvas.qr').wait_for(timeout=WAIT)
    links = await seat_links(host, 3)
    watch_link = await host.locator("#watch-link").input_value()
    assert decode_qrs(await host.locator("#watch-qr").screenshot()) == [watch_link]
    assert watch_link == f"{first.url}/games/{game_id}/watch"

    # Ada's seat is named: her page plays at once. Ben and Cy open theirs on the other node.
    def on(node: ServerProcess, link: str) -> str:
        return link.replace(first.url, node.url, 1)

    await ada.goto(links[0])
    await ada.wait_for_selector('#status[data-status="live"]', timeout=WAIT)
    assert await ada.locator("#me").inner_text() == "You are Ada"
    assert await ada.locator("#take-seat").is_hidden()
    await ben.goto(on(second, links[1]))
    await ben.wait_for_selector('#status[data-status="live"]', timeout=WAIT)
    await check_fits_phone(ben)
    await screenshot(ben, f"{shots}-take-seat-phone")
    await take_seat(ben, "Ben")

    # No placement while a seat is open: the page says why.
    await ada.locator('#board [data-legal="true"]').first.wait_for(timeout=WAIT)
    said = await placed(ada)
    assert await ada.locator("#message").get_attribute("data-code") == "table_not_full"
    assert "every seat has a player" in said

    # A late page of Cy's seat that has not heard it was taken: the server refuses, the page says so.
    late = await new_phone(browser, errors)
    await drop_seat_taken(late)
    await late.goto(on(second, links[2]))
    await late.locator("#take-seat").wait_for(state="visible", timeout=WAIT)
    # A name the table has already (Ada, in another case) is refused in words.
    await cy.goto(on(second, links[2]))
    await cy.locator("#take-seat").wait_for(state="visible", timeout=WAIT)
    await cy.fill("#seat-name", "ADA")
    await cy.click("#take-seat-button")
    await cy.wait_for_selector('#take-seat-message[data-code="bad_request"]', timeout=WAIT)
    assert await cy.locator("#take-seat").is_visible()
    await take_seat(cy, "Cy")
    await late.fill("#seat-name", "Dan")
    await late.click("#take-seat-button")
    await late.wait_for_selector('#take-seat-message[data-code="seat_taken"]', timeout=WAIT)
    assert "already has a player" in await late.locator("#take-seat-message").inner_text()
    await late.context.close()

    # The host sees who sat where, and who is connected.
    for seat, name in enumerate(["Ada", "Ben", "Cy"]):
        card = host.locator(f'.seat-card[data-seat="{seat}"]')
        await card.locator(".name", has_text=name).wait_for(timeout=WAIT)
        await card.locator(".online").wait_for(timeout=WAIT)
        assert await card.locator(".close-seat").is_hidden()

    # Everyone places.
    for phone in (ada, ben, cy):
        await phone.locator('#board [data-legal="true"]').first.wait_for(timeout=WAIT)
        assert "Accepted" in await placed(phone)
        await check_fits_phone(phone)
    await screenshot(cy, f"{shots}-play-phone")

    # A new link for Ben's seat: his old page is told in words; the new link plays.
    await host.locator('.seat-card[data-seat="1"] .reissue').click()
    await host.wait_for_function(
        "(old) => document.querySelector('.seat-card[data-seat=\"1\"] input.link').value !== old",
        arg=links[1],
        timeout=WAIT,
    )
    new_links = await seat_links(host, 3)
    assert new_links[0] == links[0] and new_links[2] == links[2] and new_links[1] != links[1]
    await ben.wait_for_selector('#status[data-status="refused"]', timeout=WAIT)
    assert "new link" in await ben.locator("#error").inner_text()
    await screenshot(ben, f"{shots}-link-replaced-phone")
    await ben.context.close()
    ben = await new_phone(browser, errors)
    await ben.goto(on(second, new_links[1]))
    await ben.wait_for_selector('#status[data-status="live"]', timeout=WAIT)
    assert await ben.locator("#me").inner_text() == "You are Ben"
    await ben.locator('#board [data-legal="true"]').first.wait_for(timeout=WAIT)
    assert "Accepted" in await placed(ben)

    # A spectator follows from the watch link.
    watcher = await new_phone(browser, errors)
    await watcher.goto(watch_link)
    await watcher.wait_for_selector('#status[data-status="live"]', timeout=WAIT)
    await check_fits_phone(watcher)

    # The end, then the next game: the host asks for it, and every page follows by itself.
    await ada.click("#end-game")
    await host.wait_for_selector("#play-again:not([disabled])", timeout=WAIT)
    await host.click("#play-again")
    await host.wait_for_url(
        lambda url: f"/games/{game_id}/" not in url and "/host#token=" in url, timeout=WAIT
    )
    next_id = host.url.split("/games/")[1].split("/")[0]
    for phone, name in ((ada, "Ada"), (ben, "Ben"), (cy, "Cy")):
        await phone.wait_for_url(f"**/games/{next_id}/play#token=*", timeout=WAIT)
        await phone.wait_for_selector('#status[data-status="live"]', timeout=WAIT)
        assert await phone.locator("#me").inner_text() == f"You are {name}"
    await watcher.wait_for_url(f"**/games/{next_id}/watch", timeout=WAIT)
    # The next game keeps the seats: its host page draws the same links for the new game, and they play.
    await host.locator('.seat-card[data-seat="2"] canvas.qr').wait_for(timeout=WAIT)
    next_links = await seat_links(host, 3)
    assert all(f"/games/{next_id}/play" in link for link in next_links.values())
    await cy.locator('#board [data-legal="true"]').first.wait_for(timeout=WAIT)
    assert "Accepted" in await placed(cy)
    # The host page on a phone, another browser: the seat tokens were shown to the host's browser alone, so
    # it offers each seat a new link instead; the watch link needs none.
    on_phone = await new_phone(browser, errors)
    await on_phone.goto(host.url)
    await on_phone.locator("#watch-qr").wait_for(timeout=WAIT)
    await on_phone.locator('.seat-card[data-seat="2"] .name', has_text="Cy").wait_for(timeout=WAIT)
    assert "make a new one" in await on_phone.locator('.seat-card[data-seat="2"] .seat-note').inner_text()
    assert await on_phone.locator('.seat-card[data-seat="2"] canvas.qr').is_hidden()
    await check_fits_phone(on_phone)
    await screenshot(on_phone, f"{shots}-host-phone")
    assert not errors, errors


async def test_a_table_starts_in_the_browser_scans_plays_and_plays_again(
    start_server: Callable[..., ServerProcess], browser: Any
) -> None:
    node = start_server()
    await play_a_table(browser, node, node, "table")


async def test_the_same_table_with_two_players_on_another_node(
    start_server: Callable[..., ServerProcess], browser: Any
) -> None:
    first, second = start_server(), start_server()
    await play_a_table(browser, first, second, "table-two-nodes")


def test_the_readme_shows_a_phone_screenshot_of_the_table() -> None:
    """The README's pages table shows a phone-sized screenshot of a table (docs/table-phone.png, copied from
    test-artifacts/screenshots/ after a run of the tests above)."""
    from PIL import Image

    from tests.support.browser import ROOT

    assert "docs/table-phone.png" in (ROOT / "README.md").read_text()
    with Image.open(ROOT / "docs" / "table-phone.png") as picture:
        assert picture.size[0] == 390
