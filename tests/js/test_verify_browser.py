"""verifyEnvelope in a browser: headless Chromium's WebCrypto (Ed25519, SHA-256) checks a live server's
envelopes with the module the server serves, and names an altered one."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.servers import ServerProcess

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.browser]

CHECK = """async () => {
  const client = await import("/client/orchestra.js");
  const { createGame, connect, getEvents, getSigningKeys, verifyEnvelope } = client;
  const created = await createGame(location.origin, { players: ['Zoë "Z" \\\\ Åsa', "李"] });
  const ada = await connect(location.origin, created.game_id, { token: created.seats[0].token });
  const accepted = await ada.place({ token: { kind: "performance", era: "classical" }, space: "viola" });
  await ada.close();
  const keys = await getSigningKeys(location.origin);
  const envelopes = [...(await getEvents(location.origin, created.game_id)), ...accepted.events];
  const results = [];
  for (const envelope of envelopes) results.push(await verifyEnvelope(envelope, keys));
  const altered = structuredClone(envelopes[1]);
  altered.event.space = "cello";
  results.push(await verifyEnvelope(altered, keys));
  return results;
}"""


async def test_verify_envelope_runs_on_a_browsers_webcrypto(server: ServerProcess, browser: Any) -> None:
    page = await browser.new_page()
    await page.goto(f"{server.url}/readyz")  # a document of the server's origin
    results = await page.evaluate(CHECK)
    assert results[:3] == [{"ok": True}] * 3, results
    assert results[3]["ok"] is False and "bad signature" in results[3]["problem"], results
