"""The pages in headless Chromium, against real server processes: watch, replay, play, and hostile names."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

import domain
from orchestra_client import GameClient, get_events, get_view
from tests.support.browser import (
    CHAIRS_JS,
    LOG_JS,
    chairs_in,
    check_legal_history,
    new_game,
    play_bots,
    screenshot,
    wait_for_board,
    wait_for_chairs,
    words_expected,
)
from tests.support.redis import lose_after
from tests.support.servers import ServerProcess

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

# Counts, in the page, the elements that flashed (the animation of a change that just arrived).
COUNT_FLASHES_JS = """() => {
  window.flashes = 0;
  new MutationObserver((changes) => {
    for (const change of changes) if (change.target.classList?.contains('flash')) window.flashes += 1;
  }).observe(document.body, {subtree: true, attributes: true, attributeFilter: ['class']});
}"""

# Records, in the page, the chairs the board shows each time it is drawn at a new version.
SNAPSHOT_BOARD_JS = """() => {
  window.snapshots = {};
  const board = document.querySelector('#board');
  new MutationObserver(() => { window.snapshots[board.dataset.version] = (CHAIRS)(); })
    .observe(board, {attributes: true, attributeFilter: ['data-version']});
}""".replace("CHAIRS", CHAIRS_JS)


async def log_of(page: Any) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = await page.evaluate(LOG_JS)
    return entries


async def nothing_more_before_a_spectator(page: Any, url: str, game_id: str) -> None:
    """A sentinel for 'nothing more arrives': another spectator joins on `url`, the page's node, and the page
    counts it; its presence frame came on the page's connection after anything the node sent before it."""
    async with await GameClient.connect(url, game_id, reconnect=False):
        await page.wait_for_function(
            "() => document.querySelector('#watching')?.dataset.count === '2'", timeout=15_000
        )


async def wait_for_log(page: Any, versions: int, timeout: float = 15.0) -> list[dict[str, Any]]:
    """Wait until the log holds `versions` lines; return them, oldest first."""
    await page.wait_for_function(
        "(n) => document.querySelectorAll('#log li').length >= n", arg=versions, timeout=timeout * 1000
    )
    return sorted(await log_of(page), key=lambda entry: entry["version"])


def check_log(entries: list[dict[str, Any]], envelopes: list[dict[str, Any]], players: list[str]) -> None:
    """One line per envelope, no duplicate, each in words naming who did what and what they gained."""
    assert [entry["version"] for entry in entries] == [env["version"] for env in envelopes]
    for entry, envelope in zip(entries, envelopes, strict=True):
        for phrase in words_expected(envelope, players):
            assert phrase in entry["text"], (phrase, entry, envelope["event"])


async def test_the_watch_page_draws_a_game_bots_play_as_its_events_arrive(
    server: ServerProcess, page: Any
) -> None:
    game_id, tokens = await new_game(server.url)
    await page.goto(f"{server.url}/games/{game_id}/watch")
    await page.wait_for_selector('#status[data-status="live"]')
    await wait_for_log(page, 1)
    assert await page.locator("#board [data-space]").count() == 14
    assert await page.locator("#board [data-chair-seat], #board [data-chair-seats]").count() == 0
    await page.evaluate(COUNT_FLASHES_JS)
    await page.evaluate(SNAPSHOT_BOARD_JS)

    results = await play_bots(server.url, game_id, tokens, pace=(0.05, 0.15), placements=6)
    assert results[0].ended_game
    envelopes = await get_events(server.url, game_id)
    assert envelopes[-1]["event"]["type"] == "GameEnded"
    entries = await wait_for_log(page, len(envelopes))
    check_log(entries, envelopes, ["Ada", "Ben", "Cy"])
    final = await get_view(server.url, game_id)
    await wait_for_board(page, final)
    assert await page.locator("#board").get_attribute("data-version") == str(final["version"])
    assert await page.evaluate("window.flashes") > 0, "changes are animated"
    # The board changed as the events arrived, and showed at each version the chairs the server had then.
    snapshots = await page.evaluate("window.snapshots")
    shown = sorted(int(version) for version in snapshots)
    assert len(shown) >= 4 and shown[-1] == final["version"], shown
    for version in shown:
        expected = chairs_in(await get_view(server.url, game_id, at=version))
        assert snapshots[str(version)] == expected, version
    scores = await page.locator("#scores tbody tr").all_inner_texts()
    for score, row in zip(final["scores"], scores, strict=True):
        assert str(score["prestige"]) in row
    check_legal_history(envelopes)
    await page.wait_for_function("() => !document.querySelector('.flash')")
    await screenshot(page, "watch")


async def test_the_watch_page_is_built_on_the_client_library_and_shows_what_the_server_holds(
    server: ServerProcess, page: Any
) -> None:
    game_id, tokens = await new_game(server.url, ["Ada", "Ben"])
    loaded: list[str] = []
    page.on("request", lambda request: loaded.append(urlsplit(request.url).path))
    await page.goto(f"{server.url}/games/{game_id}/watch")
    await page.wait_for_selector('#status[data-status="live"]')
    assert "/client/orchestra.js" in loaded and "/static/orchestra.js" not in loaded
    # The page and a program share one module: the library the page imported is the one served.
    exported = await page.evaluate("import('/client/orchestra.js').then((m) => Object.keys(m).sort())")
    assert {"connect", "applyDelta", "describeToken", "getLegal"} <= set(exported)
    moves = [
        (0, {"kind": "performance", "era": "classical"}, "viola"),
        (1, {"kind": "performance", "era": "classical"}, "viola"),
        (1, {"kind": "performance", "era": "classical"}, "viola"),
        (0, {"kind": "instrument", "instrument": "rare_winds"}, "rare_winds"),
        (1, {"kind": "repair", "family": "winds"}, "oboe"),
    ]
    for seat, token, space in moves:
        async with await GameClient.connect(server.url, game_id, tokens[seat], reconnect=False) as player:
            assert (await player.place(token, space))["type"] == "accepted"
        view = await get_view(server.url, game_id)
        await wait_for_board(page, view)
        assert await page.locator("#board").get_attribute("data-version") == str(view["version"])
        shown = await page.evaluate(SCORES_JS)
        assert [(row[0], row[2]) for row in shown] == [
            (str(len(score["chairs"])), str(score["prestige"])) for score in view["scores"]
        ]
    # Token words come from the library's describeToken: a chip's title names the token as it does.
    title = await page.locator('[data-space="oboe"] .chair .chip').get_attribute("title")
    assert title == "Ben: a Winds repair"


async def test_the_replay_page_shows_the_view_at_the_version_it_is_moved_to(
    server: ServerProcess, page: Any
) -> None:
    game_id, tokens = await new_game(server.url)
    await play_bots(server.url, game_id, tokens, placements=5, seed=11)
    envelopes = await get_events(server.url, game_id)
    last = envelopes[-1]["version"]
    views = {v: await get_view(server.url, game_id, at=v) for v in range(1, last + 1)}
    replay = f"{server.url}/games/{game_id}/replay"

    async def shows(version: int) -> None:
        await page.wait_for_selector(f'#board[data-version="{version}"]')
        await wait_for_chairs(page, views[version])
        assert f"at={version}" in page.url
        assert await page.locator("#slider").input_value() == str(version)
        visible = await page.locator("#log li:not(.future)").count()
        assert visible == version

    await page.goto(f"{replay}?at=4")
    await shows(4)
    assert chairs_in(views[4]) != chairs_in(views[last])
    await page.click("#next")
    await shows(5)
    await page.click("#prev")
    await page.click("#prev")
    await shows(3)
    await page.keyboard.press("ArrowRight")
    await shows(4)
    await page.keyboard.press("ArrowLeft")
    await page.keyboard.press("ArrowLeft")
    await shows(2)
    await page.keyboard.press("End")
    await shows(last)
    await page.keyboard.press("Home")
    await shows(1)
    await page.locator("#slider").fill(str(last - 2))
    await shows(last - 2)
    await page.click("#last")
    await shows(last)
    await page.click("#first")
    await shows(1)
    # A shared link opens at its moment; its log shows the events up to it, in words.
    middle = last // 2
    await page.goto(f"{replay}?at={middle}")
    await shows(middle)
    entries = sorted(await log_of(page), key=lambda entry: entry["version"])
    check_log(entries, envelopes, ["Ada", "Ben", "Cy"])
    await page.wait_for_function("() => !document.querySelector('.flash')")
    await screenshot(page, "replay")


async def test_the_watch_page_recovers_from_a_server_restart_without_duplicate_lines(
    start_server: Callable[..., ServerProcess], page: Any
) -> None:
    first = start_server()
    port = urlsplit(first.url).port
    game_id, tokens = await new_game(first.url)
    await play_bots(first.url, game_id, tokens[1:], placements=3, seed=5)
    await page.goto(f"{first.url}/games/{game_id}/watch")
    before = len(await get_events(first.url, game_id))
    await wait_for_log(page, before)
    await page.evaluate("window.notReloaded = true")

    first.terminate()
    await page.wait_for_selector('#status[data-status="reconnecting"]', timeout=10_000)
    second = start_server(port=port)
    assert second.url == first.url
    await page.wait_for_selector('#status[data-status="live"]', timeout=15_000)
    results = await play_bots(second.url, game_id, tokens, placements=3, seed=9)
    assert results[0].ended_game

    envelopes = await get_events(second.url, game_id)
    assert len(envelopes) > before
    await wait_for_log(page, len(envelopes))
    await nothing_more_before_a_spectator(page, second.url, game_id)  # a duplicate: an extra line
    entries = sorted(await log_of(page), key=lambda entry: entry["version"])
    check_log(entries, envelopes, ["Ada", "Ben", "Cy"])
    await wait_for_board(page, await get_view(second.url, game_id))
    assert await page.evaluate("window.notReloaded") is True


@pytest.mark.logs_warnings  # the node warns that the stream lost what it folded, and reads the game again
async def test_the_watch_page_starts_its_log_anew_when_the_store_lost_envelopes_it_showed(
    start_server: Callable[..., ServerProcess], redis_url: str, page: Any
) -> None:
    """Two nodes on one Redis. The store loses version 3, which the page showed, and the second node
    writes another version 3: the page's node closes it with 4001, and the page logs the history again
    as the stream holds it, without a page reload and without the lost line."""
    first, second = start_server(), start_server()
    game_id, tokens = await new_game(first.url)
    await page.goto(f"{first.url}/games/{game_id}/watch")
    await wait_for_log(page, 1)
    await page.evaluate("window.notReloaded = true")
    winds = {"kind": "repair", "family": "winds"}
    async with await GameClient.connect(first.url, game_id, tokens[0]) as ada:
        assert (await ada.place(winds, "oboe"))["version"] == 2
        async with await GameClient.connect(first.url, game_id, tokens[1], reconnect=False) as ben:
            lost = await ben.place(winds, "oboe")
        assert lost["version"] == 3
        await wait_for_log(page, 3)
        lose_after(redis_url, game_id, 2, [f"1:{lost['id']}"])
        async with await GameClient.connect(second.url, game_id, tokens[2], reconnect=False) as cy:
            assert (await cy.place({"kind": "performance", "era": "baroque"}, "violin_bc"))["version"] == 3
        assert (await ada.place(winds, "oboe"))["version"] == 4

    envelopes = await get_events(first.url, game_id)
    assert [envelope["seat"] for envelope in envelopes[1:]] == [0, 2, 0]
    await wait_for_log(page, 4)
    await nothing_more_before_a_spectator(page, first.url, game_id)  # a line kept from before: one too many
    entries = sorted(await log_of(page), key=lambda entry: entry["version"])
    check_log(entries, envelopes, ["Ada", "Ben", "Cy"])
    await wait_for_board(page, await get_view(first.url, game_id))
    assert await page.evaluate("window.notReloaded") is True


# Each row of the scores table: chairs held (count), their names (the cell's title), prestige, resources.
SCORES_JS = """() => [...document.querySelectorAll('#scores tbody tr')].map((row) => {
  const chairs = row.querySelector('.chairs');
  return [chairs.textContent, chairs.title, row.querySelector('.prestige').textContent,
          row.querySelector('.resources').textContent];
})"""


async def test_the_watch_page_takes_view_deltas_and_resyncs_when_one_is_lost(
    server: ServerProcess, page: Any
) -> None:
    game_id, tokens = await new_game(server.url, ["Ada", "Ben"])
    # Record every hello the page sends, and every view_delta frame it gets; drop one when asked (as a
    # frame lost on the way would be).
    await page.add_init_script("""(() => {
      window.hellos = []; window.deltas = 0; window.dropNext = false;
      window.WebSocket = class extends window.WebSocket {
        send(data) {
          const frame = JSON.parse(data);
          if (frame.type === 'hello') window.hellos.push(frame);
          return super.send(data);
        }
        addEventListener(type, listener, options) {
          if (type !== 'message') return super.addEventListener(type, listener, options);
          return super.addEventListener(type, (m) => {
            if (m.data.includes('"view_delta":')) {
              if (window.dropNext) { window.dropNext = false; return; }
              window.deltas += 1;
            }
            listener(m);
          }, options);
        }
      };
    })();""")
    await page.goto(f"{server.url}/games/{game_id}/watch")
    await page.wait_for_selector('#status[data-status="live"]')
    perf = {"kind": "performance", "era": "classical"}
    async with await GameClient.connect(server.url, game_id, tokens[0]) as ada:
        for _ in range(4):
            assert (await ada.place(perf, "viola"))["type"] == "accepted"
        rare = {"kind": "instrument", "instrument": "rare_winds"}
        async with await GameClient.connect(server.url, game_id, tokens[1]) as ben:
            assert (await ben.place(rare, "rare_winds"))["type"] == "accepted"
        assert (await ada.place(rare, "rare_winds"))["type"] == "accepted"
        await wait_for_board(page, await get_view(server.url, game_id))
        assert (await page.evaluate(CHAIRS_JS))["rare_winds"] == "1 0"
        hellos = await page.evaluate("window.hellos")
        assert [hello["view"] for hello in hellos] == ["delta"]
        assert await page.evaluate("window.deltas") == 6
        # The page loses the frame of version 8: the next one (9) does not follow what it holds, and it
        # starts again from a welcome's whole view, with the history after 7.
        await page.evaluate("window.dropNext = true")
        assert (await ada.place(perf, "viola"))["type"] == "accepted"
        await page.wait_for_function("() => window.dropNext === false")
        assert (await ada.place(perf, "viola"))["type"] == "accepted"
        await wait_for_board(page, await get_view(server.url, game_id))
        hellos = await page.evaluate("window.hellos")
        assert len(hellos) == 2 and hellos[1]["since"] == 7
        check_log(await wait_for_log(page, 9), await get_events(server.url, game_id), ["Ada", "Ben"])
        deltas = await page.evaluate("window.deltas")
        assert (await ada.place(perf, "viola"))["type"] == "accepted"  # and it follows on from there
        await wait_for_board(page, await get_view(server.url, game_id))
        assert await page.evaluate("window.deltas") == deltas + 1
        assert len(await page.evaluate("window.hellos")) == 2
        # Ben's instrument takes the Viola from Ada (her count there drops to 0), then more rare chairs:
        # the scores the page rebuilds from the deltas' counts are those a whole view shows.
        async with await GameClient.connect(server.url, game_id, tokens[1]) as ben:
            viola = {"kind": "instrument", "instrument": "viola"}
            assert (await ben.place(viola, "viola"))["type"] == "accepted"
            for _ in range(2):
                assert (await ben.place(rare, "rare_winds"))["type"] == "accepted"
        view = await get_view(server.url, game_id)
        await wait_for_board(page, view)
        assert await page.evaluate("window.deltas") == deltas + 4
        shown = await page.evaluate(SCORES_JS)
        assert [(row[0], row[2]) for row in shown] == [
            (str(len(score["chairs"])), str(score["prestige"])) for score in view["scores"]
        ]
        fresh = await page.context.new_page()  # its board comes from a welcome's whole view
        await fresh.goto(f"{server.url}/games/{game_id}/watch")
        await wait_for_board(fresh, view)
        assert await fresh.evaluate(SCORES_JS) == shown
        await fresh.close()


async def test_player_names_are_shown_as_text_and_never_run(server: ServerProcess, page: Any) -> None:
    hostile = ["<script>window.pwned=1</script>", '<img src=x onerror="pwned=2">', "Cy"]
    game_id, tokens = await new_game(server.url, hostile)
    for token in tokens:
        async with await GameClient.connect(server.url, game_id, token) as player:
            answer = await player.place({"kind": "performance", "era": "classical"}, "viola")
            assert answer["type"] == "accepted", answer
    async with await GameClient.connect(server.url, game_id, tokens[0]) as player:
        assert (await player.end_game())["type"] == "accepted"

    for path in ("/", f"/games/{game_id}/watch", f"/games/{game_id}/replay"):
        await page.goto(server.url + path)
        text_of = "#games" if path == "/" else "#log"
        await page.wait_for_function(
            "([where, name]) => document.querySelector(where)?.textContent.includes(name)",
            arg=[text_of, hostile[1]],
        )
        shown = await page.locator("body").inner_text()
        assert hostile[0] in shown and hostile[1] in shown, path
        assert await page.evaluate("typeof window.pwned") == "undefined", path
        assert await page.locator("main img, main script").count() == 0, path
        if path == "/":  # the list of games: the game's players, version, state and links
            row = page.locator(f'tr[data-game="{game_id}"]')
            assert await row.locator("td.version").inner_text() == "5"
            assert await row.locator("td.ended").count() == 1
            assert await row.locator("a").first.get_attribute("href") == f"/games/{game_id}/watch"


async def test_a_private_game_is_watched_with_the_token_in_the_fragment(
    server: ServerProcess, page: Any
) -> None:
    async with httpx.AsyncClient(base_url=server.url) as http:
        created = (await http.post("/games", json={"players": ["Ada"], "spectators": "token"})).json()
    game_id, watch = created["game_id"], created["watch_token"]
    await page.goto(f"{server.url}/games/{game_id}/watch")
    await page.wait_for_selector('#status[data-status="refused"]')
    await page.goto("about:blank")  # a change of fragment alone would not load the page again
    await page.goto(f"{server.url}/games/{game_id}/watch#token={watch}")
    await page.wait_for_selector('#status[data-status="live"]')
    await wait_for_log(page, 1)
    await page.goto(f"{server.url}/games/{game_id}/replay#token={watch}")
    await page.wait_for_selector('#board[data-version="1"]')
    assert watch not in server.logs()


async def test_the_play_page_places_only_where_the_server_says(server: ServerProcess, page: Any) -> None:
    game_id, tokens = await new_game(server.url, ["Ada", "Ben"])
    await page.goto(f"{server.url}/games/{game_id}/play#token={tokens[0]}")
    await page.wait_for_selector('#status[data-status="live"]')
    await page.select_option("#kind", "repair")
    await page.select_option("#which", "winds")
    await page.wait_for_function(
        "() => document.querySelector('[data-space=\"oboe\"]').dataset.legal === 'true' "
        "&& document.querySelector('[data-space=\"viola\"]').dataset.legal === 'false'"
    )
    legal = await page.evaluate(
        "() => [...document.querySelectorAll('[data-legal=\"true\"]')].map((e) => e.dataset.space)"
    )
    token = domain.RepairToken(family="winds")
    assert legal == list(domain.legal_spaces(domain.STANDARD, token))

    await page.click('[data-space="viola"]')
    await page.wait_for_function("() => document.querySelector('#message').textContent.includes('cannot')")
    await page.click('[data-space="clarinet"]')
    await page.wait_for_selector('[data-space="clarinet"][data-chair-seat="0"]')
    view = await get_view(server.url, game_id)
    assert view["version"] == 2 and view["spaces"]["clarinet"]["chair"]["seat"] == 0
    assert view["spaces"]["viola"]["chair"] is None

    await page.select_option("#kind", "instrument")
    await page.select_option("#which", "rare_strings")
    await page.fill("#skill", "7")
    await page.dispatch_event("#skill", "change")
    await page.wait_for_selector("#material2:visible")
    await page.select_option("#material1", "metal")
    await page.select_option("#material2", "animal")
    await page.click('[data-space="rare_strings"]')
    await page.wait_for_selector('[data-space="rare_strings"][data-chair-seats="0"]')
    events = await get_events(server.url, game_id, after=2)
    assert events[0]["event"]["bonus"] == {"money": 2, "inspiration": 2, "metal": 1, "animal": 1}
    await page.click("#end-game")
    await page.wait_for_function("() => document.body.classList.contains('ended')")
